"""File leases with the real claude CLI (issue 15): `hive-office serve` runs two claude agents
against scripted Messages APIs in one git repository. Pam leases a file (a desk with no CLI
running, so the person acts for it: a running desk's lease is its own process's alone);
Jim's Edit of it is denied by the office's PreToolUse hook, and the model reads the holder's
name in the tool result. Pam then renews the lease to one second; once it has lapsed, the
same Edit goes through and changes the file."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.demo.scripted_model import ToolUse, has_tool_result, turn, user_says
from tests.claude_office import CLAUDE, ClaudeOffice, make_claude_office, serving
from tests.e2e.test_policy_claude import tool_results
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]

AGENTS = ("michael", "jim")
# The lease holder: a desk that runs no CLI, which the person acts for.
PAM = '\n[[agents]]\nid = "pam"\nname = "Pam"\nprovider = "shell"\nsend_only = true\n'


def edit(path: Path) -> ToolUse:
    return ToolUse("Edit", {"file_path": str(path), "old_string": "x = 1", "new_string": "x = 2"})


@pytest.fixture
def floor(short_tmp: Path) -> Iterator[tuple[ClaudeOffice, Path, list[ToolUse]]]:
    # Short paths: the office's sockets live under the home (AF_UNIX paths are <= 107 bytes).
    root = short_tmp
    target = root / "project" / "src" / "parser.py"
    calls = [ToolUse("Read", {"file_path": str(target)}), edit(target), edit(target)]
    office = make_claude_office(
        root,
        {
            "jim": [
                turn(user_says("read the parser"), calls[0]),
                turn(has_tool_result(), "Read it."),
                turn(user_says("edit the parser"), calls[1]),
                turn(has_tool_result(), "Leased by someone else."),
                turn(user_says("try again"), calls[2]),
                turn(has_tool_result(), "Edited."),
            ]
        },
        agents=AGENTS,
        # Both in the one checkout: the lease is found by the repository either way. Jim's
        # CLI accepts edits without asking (the person allowed it): only the office denies.
        options={
            "jim": 'worktree = false\ncommand = ["claude", "--permission-mode", "acceptEdits"]\n'
        },
    )
    with (office.home / "office.toml").open("a") as roster:
        roster.write(PAM)
    target.parent.mkdir(parents=True)
    target.write_text("x = 1\n")
    for args in (
        ("init", "-q", "-b", "main"),
        ("add", "."),
        ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"),
    ):
        subprocess.run(["git", *args], cwd=office.project, check=True, capture_output=True)
    with serving(office, root / "serve.log"):
        yield office, target, calls


def test_an_edit_of_a_leased_file_is_denied_until_the_lease_lapses(
    floor: tuple[ClaudeOffice, Path, list[ToolUse]],
) -> None:
    office, target, (_read, denied_edit, allowed_edit) = floor
    model = office.models["jim"]

    def say(text: str) -> None:
        office.run("hive-office", "type", "--home", str(office.home), "jim", text)

    say("read the parser")
    model.wait_for(lambda r: r.turn == 1, 60)
    taken = office.run(
        "hive", "lease", str(target), "--reason", "new grammar", "--ttl", "10m", agent="pam"
    )
    assert "leased src/parser.py in" in taken.stdout

    say("edit the parser")
    result = tool_results(model.wait_for(lambda r: r.turn == 3, 60))[denied_edit.id]
    assert result.get("is_error"), result
    text = json.dumps(result["content"])
    assert "src/parser.py in" in text and "is leased by pam until" in text, text
    assert "(new grammar)" in text
    assert target.read_text() == "x = 1\n"

    # The holder renews it to one second; it lapses on its own.
    office.run("hive", "lease", str(target), "--ttl", "1s", agent="pam")
    wait_for(
        lambda: not json.loads(office.run("hive", "lease", "list", "--json").stdout)["leases"],
        "the lease to lapse",
    )
    say("try again")
    result = tool_results(model.wait_for(lambda r: r.turn == 5, 60))[allowed_edit.id]
    assert not result.get("is_error"), result
    assert target.read_text() == "x = 2\n"
    denials = [e["detail"] for e in office.log("jim") if "denied Edit" in e["detail"]]
    assert len(denials) == 1 and "leased by pam" in denials[0], denials
