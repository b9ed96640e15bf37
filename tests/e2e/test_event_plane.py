"""The event plane with the real claude CLI: `hive-office serve` runs two claude agents in
ptys, pointed at scripted Messages APIs on 127.0.0.1, and the office's hooks drive them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hive_core.demo.scripted_model import (
    RecordedRequest,
    ToolUse,
    bash,
    has_tool_result,
    last_user_texts,
    turn,
    user_says,
)
from tests.claude_office import AGENTS, BIN, CLAUDE, ClaudeOffice, make_claude_office
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]


@pytest.fixture
def start_floor(short_tmp: Path) -> Iterator[Callable[..., HeadlessOffice]]:
    floors: list[HeadlessOffice] = []
    # Short paths: the office's sockets live under the home (AF_UNIX paths are <= 107 bytes).
    root = short_tmp

    def start(scenarios: dict[str, list[Any]], *, stop_block_cap: int = 3) -> HeadlessOffice:
        office = make_claude_office(root, scenarios, stop_block_cap=stop_block_cap)
        proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(office.home)],
            env=office.env,
            stdout=(root / "serve.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        floor = HeadlessOffice(office, proc)
        floors.append(floor)
        wait_for(
            lambda: all(
                floor.registry().get(a, {}).get("session_id")
                and floor.registry()[a]["status"] == "idle"
                for a in AGENTS
            ),
            "both agents' SessionStart",
            timeout=90,
        )
        return floor

    yield start
    for floor in floors:
        if floor.proc.poll() is None:
            floor.proc.send_signal(signal.SIGTERM)
            try:
                floor.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                floor.proc.kill()
        floor.close()


class HeadlessOffice:
    """A ClaudeOffice served headless by a real `hive-office serve`."""

    def __init__(self, office: ClaudeOffice, proc: subprocess.Popen[bytes]) -> None:
        self.office = office
        self.proc = proc

    def __getattr__(self, name: str) -> Any:
        return getattr(self.office, name)

    def agent_pids(self) -> set[int]:
        return self.office.agent_pids() - {self.proc.pid}


def feedback_id(request: dict[str, Any]) -> str:
    """The first message id in the Stop hook feedback the agent was given."""
    text = "\n".join(last_user_texts(request))
    match = re.search(r"- (\S+) from ", text)
    assert match, text
    return match.group(1)


def texts_of(request: RecordedRequest) -> str:
    if request.kind != "main":
        return ""
    return "\n".join(last_user_texts(request.body))


# --- 1 ------------------------------------------------------------------------------------


def test_session_and_turn_reach_the_registry(start_floor: Callable[..., HeadlessOffice]) -> None:
    floor = start_floor({"jim": [turn(user_says("hello office"), "Hello!", delay=2.0)]})
    jim = floor.registry()["jim"]
    session_id = jim["session_id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", session_id) and jim["pid"]
    floor.run("hive-office", "type", "--home", str(floor.home), "jim", "hello office")
    wait_for(lambda: floor.registry()["jim"]["status"] == "working", "jim working", timeout=30)
    wait_for(lambda: floor.registry()["jim"]["status"] == "idle", "jim idle again", timeout=30)
    assert floor.registry()["jim"]["session_id"] == session_id
    details = [e["detail"] for e in floor.log("jim")]
    assert any("UserPromptSubmit" in d and "[idle -> working]" in d for d in details), details
    assert any("Stop: turn ended [working -> idle]" in d for d in details), details
    assert floor.models["jim"].scenario.done


# --- 2 ------------------------------------------------------------------------------------


def test_mail_that_arrives_mid_turn_is_drained_at_stop(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    floor = start_floor(
        {
            "jim": [
                turn(user_says("start the build"), bash("hive roster"), delay=3.0),
                turn(has_tool_result(), "Build started."),
                turn(user_says("Stop hook feedback"), build=lambda req: [bash("hive inbox")]),
                turn(
                    has_tool_result(),
                    build=lambda req: [bash(f"hive reply {mail_id} --body 'Build is green.'")],
                ),
                turn(has_tool_result(), build=lambda req: [bash(f"hive done {mail_id}")]),
                turn(has_tool_result(), "Answered Michael."),
            ]
        }
    )
    floor.run("hive-office", "type", "--home", str(floor.home), "jim", "start the build")
    wait_for(lambda: floor.registry()["jim"]["status"] == "working", "jim working", timeout=30)
    floor.post_as("michael", "jim", "build status?", "Is the build green?", act="query")
    [mail] = wait_for(lambda: floor.inbox("jim"), "delivery to jim")
    mail_id = mail["id"]
    feedback = floor.models["jim"].wait_for(lambda r: "Stop hook feedback" in texts_of(r), 60)
    text = texts_of(feedback)
    assert (
        mail_id in text and "from michael (query): build status?" in text and "hive inbox" in text
    )
    reply = wait_for(
        lambda: [m for m in floor.inbox("michael") if m.get("in_reply_to") == mail_id],
        "jim's reply in michael's inbox",
        timeout=60,
    )[0]
    assert reply["from"] == "jim" and reply["body"] == "Build is green." and reply["hops"] == 1
    wait_for(lambda: not floor.inbox("jim"), "jim marks the message done", timeout=60)
    wait_for(
        lambda: f"agents/michael/inbox/{reply['id']}.json" in floor.git("ls-files"),
        "the reply committed",
        timeout=20,
    )
    bash_calls = [r.body for r in floor.models["jim"].main_requests]
    assert any("Build is green" in json.dumps(b) for b in bash_calls)


# --- 3 ------------------------------------------------------------------------------------


def test_block_cap_releases_the_agent(start_floor: Callable[..., HeadlessOffice]) -> None:
    cap = 2
    # Each continuation takes the model a while, so mail keeps arriving during the chain.
    slow_feedback = [turn(user_says("Stop hook feedback"), "Noted.", delay=1.5) for _ in range(cap)]
    floor = start_floor(
        {"jim": [turn(user_says("tidy up"), "Tidied."), *slow_feedback]}, stop_block_cap=cap
    )

    def mail(n: int) -> None:
        floor.run("hive", "send", "--to", "jim", "--subject", f"fyi {n}", "--body", "more")

    mail(1)
    wait_for(lambda: floor.inbox("jim"), "first delivery")
    floor.run("hive-office", "type", "--home", str(floor.home), "jim", "tidy up")
    # More mail while the agent is kept working (it never marks any done), all of it
    # before the last block, so every message is in a digest it was given.
    for n in (2, 3):
        time.sleep(0.5)
        mail(n)
    wait_for(
        lambda: any("released after 2 blocks" in e["detail"] for e in floor.log("jim")),
        "release",
        60,
    )
    # Each block the model was given, once: on a loaded machine the CLI may send a slow
    # request again (the same conversation, as long as before), seen here twice.
    feedbacks = list(
        {
            len(r.body["messages"]): texts_of(r)
            for r in floor.models["jim"].main_requests
            if "Stop hook feedback" in texts_of(r)
        }.values()
    )
    assert len(feedbacks) == cap
    assert "fyi 3" in feedbacks[-1], "mail that arrived mid-chain is in the next digest"
    wait_for(lambda: floor.registry()["jim"]["status"] == "idle", "jim idle")
    time.sleep(3)
    # Released means released: no more blocks, and no nudge for mail it was already told
    # about. Counted from the office's own record: on a loaded machine the CLI may retry
    # a slow request, which the model would see twice.
    assert len([e for e in floor.log("jim") if "kept working" in e["detail"]]) == cap
    assert not any("nudged" in e["detail"] for e in floor.log("jim"))


# --- 4 ------------------------------------------------------------------------------------


def test_web_tool_denied_with_a_reason_the_model_sees(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    fetch = ToolUse("WebFetch", {"url": "https://example.com/spec", "prompt": "Summarise it."})
    floor = start_floor(
        {
            "jim": [
                turn(user_says("read the spec"), fetch),
                turn(has_tool_result(), "I will ask someone with web access."),
            ]
        }
    )
    floor.run("hive-office", "type", "--home", str(floor.home), "jim", "read the spec online")
    after = floor.models["jim"].wait_for(lambda r: r.turn == 1, 60)
    results = [
        block
        for message in after.body["messages"]
        if message["role"] == "user"
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "tool_result" and block.get("tool_use_id") == fetch.id
    ]
    assert results and results[0].get("is_error")
    content = json.dumps(results[0]["content"])
    assert "WebFetch is only for agents with web access" in content
    assert any("denied WebFetch" in e["detail"] for e in floor.log("jim"))


# --- 5 ------------------------------------------------------------------------------------


def test_a_frame_with_a_wrong_secret_changes_nothing(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    floor = start_floor({})
    before = floor.registry()["jim"]
    env = {
        **floor.env,
        "HIVE_AGENT_ID": "jim",
        "HIVE_SECRET": "not-the-secret",
        "HIVE_SOCKET": str(floor.home / "run" / "hook.sock"),
    }
    event = {"hook_event_name": "SessionEnd", "session_id": before["session_id"], "reason": "other"}
    done = subprocess.run(
        [str(BIN / "cth-hook")],
        input=json.dumps(event),
        env=env,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    wait_for(
        lambda: any("wrong or stale secret" in e["detail"] for e in floor.log("jim")),
        "the log line",
    )
    after = floor.registry()["jim"]
    assert after["status"] == "idle" and after["session_id"] == before["session_id"]


# --- 6 ------------------------------------------------------------------------------------


def test_killing_the_office_leaves_no_orphans(start_floor: Callable[..., HeadlessOffice]) -> None:
    floor = start_floor({})
    pids = floor.agent_pids()
    registered = {floor.registry()[a]["pid"] for a in AGENTS}
    assert registered <= pids and len(pids) >= 2
    floor.proc.send_signal(signal.SIGKILL)
    floor.proc.wait()
    wait_for(lambda: not floor.agent_pids(), f"agent processes {pids} to go", timeout=15)


# --- the manager's first turn ----------------------------------------------------------


def test_manager_gets_the_standup_as_its_first_turn(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    floor = start_floor({})
    first = floor.models["michael"].wait_for(lambda r: r.kind == "main", 30)
    assert "The office just opened" in texts_of(first)
    # Posted once the team's CLIs have started: perhaps after the first turn began.
    [standup] = wait_for(
        lambda: (
            [m for m in floor.inbox("michael") if m["id"].endswith("-standup")]
            or [
                json.loads(p.read_text())
                for p in (floor.home / "hive/agents/michael/inbox/.done").glob("*-standup.json")
            ]
        ),
        "the standup",
    )
    assert standup["from"] == "router" and "- jim (Jim, Engineer)" in standup["body"]
    assert "Open tasks:" in standup["body"] and "Triage waiting" in standup["body"]
    assert not floor.models["jim"].main_requests, "only the manager is given a first turn"
