"""The tool policy with the real claude CLI (issue 13): `hive-office serve` runs two claude
agents against scripted Messages APIs. Jim (no web) tries a relative-path write into
agent-settings after a `cd`, an Edit and a shell append to the hook program, and a
`curl`: each is denied and the scripted model receives the reason in the tool result
(the office's, or for the Edit the CLI's own deny rule, which Claude checks first). Pete (`web = true`)
runs the same `curl` and it goes through: the office does not deny it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cth_hook
from hive_core.demo.scripted_model import (
    RecordedRequest,
    ToolUse,
    bash,
    has_tool_result,
    turn,
    user_says,
)
from tests.claude_office import CLAUDE, ClaudeOffice, make_claude_office, serving
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]

AGENTS = ("jim", "pete")  # jim manages; pete is the research agent
HOOK_MAIN = Path(cth_hook.__file__).parent / "__main__.py"


@pytest.fixture
def floor(short_tmp: Path) -> Iterator[tuple[ClaudeOffice, dict[str, list[ToolUse]]]]:
    # Short paths: the office's sockets live under the home (AF_UNIX paths are <= 107 bytes).
    root = short_tmp
    home = root / "home"
    jim_calls = [
        bash(f"cd {home} && echo x > agent-settings/jim.json"),
        ToolUse("Edit", {"file_path": str(HOOK_MAIN), "old_string": "import", "new_string": "x"}),
        bash(f"echo 'import os' >> {HOOK_MAIN}"),
        # The URL is not reached either way: the office refuses before the CLI runs it.
        bash("curl -s http://127.0.0.1:9/"),
    ]
    # Pete's curl goes to its own scripted server, which records the GET.
    pete_calls: list[ToolUse] = []
    office = make_claude_office(
        root,
        {
            "jim": [
                turn(user_says("try the locks"), *jim_calls),
                turn(has_tool_result(), "Noted."),
            ],
            "pete": [
                turn(user_says("fetch the page"), build=lambda req: pete_calls),
                turn(has_tool_result(), "Fetched."),
            ],
        },
        agents=AGENTS,
        # Pete's own CLI must not stop at a permission prompt for curl: the person allowed it.
        options={"pete": 'web = true\ncommand = ["claude", "--allowedTools=Bash(curl:*)"]\n'},
    )
    pete_calls.append(bash(f"curl -s {office.models['pete'].base_url}/from-pete"))
    with serving(office, root / "serve.log"):
        yield office, {"jim": jim_calls, "pete": pete_calls}


def tool_results(request: RecordedRequest) -> dict[str, dict[str, Any]]:
    return {
        block["tool_use_id"]: block
        for message in request.body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


def test_locked_files_and_the_network_are_refused_with_reasons_the_model_sees(
    floor: tuple[ClaudeOffice, dict[str, list[ToolUse]]],
) -> None:
    office, calls = floor
    settings_before = (office.home / "agent-settings" / "jim.json").read_bytes()
    office.run("hive-office", "type", "--home", str(office.home), "jim", "try the locks")
    office.run("hive-office", "type", "--home", str(office.home), "pete", "fetch the page")

    after = office.models["jim"].wait_for(lambda r: r.turn == 1, 60)
    results = tool_results(after)
    write, edit, append, curl = (results[call.id] for call in calls["jim"])
    for result, reason in (
        (write, "agent-settings/ (your CLI's settings and hooks) is locked"),
        # Claude checks its settings' deny rules before any hook: the Edit is refused by
        # the rule the office wrote, in the CLI's words.
        (edit, "denied by your permission settings"),
        (append, "The hook program (cth_hook) is locked"),
        (curl, "`curl` reaches the network, and you are not a research agent"),
    ):
        assert result.get("is_error"), result
        assert reason in json.dumps(result["content"]), result
    assert "hive send --to pete" in json.dumps(curl["content"])
    assert (office.home / "agent-settings" / "jim.json").read_bytes() == settings_before
    assert "import" in HOOK_MAIN.read_text()
    # The office logs a refusal after answering the hook: the model may have its turn first.
    wait_for(
        lambda: len([e for e in office.log("jim") if "denied" in e["detail"]]) >= 3,
        "jim's three refusals logged",
        30,
    )
    denied = [e["detail"] for e in office.log("jim") if "denied" in e["detail"]]
    assert len(denied) == 3, denied  # the Edit never reached the hook

    # The research agent's curl ran: its scripted server saw the GET, and the output came back.
    office.models["pete"].wait_for(lambda r: r.method == "GET" and r.path == "/from-pete", 60)
    fetched = office.models["pete"].wait_for(lambda r: r.turn == 1, 60)
    (result,) = (tool_results(fetched)[call.id] for call in calls["pete"])
    assert not result.get("is_error"), result
    wait_for(
        lambda: any("Bash: curl -s" in e["detail"] for e in office.log("pete")),
        "pete's curl logged",
        30,
    )
    assert not any("denied" in e["detail"] for e in office.log("pete"))
