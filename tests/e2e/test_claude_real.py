"""The real claude CLI against the scripted model, its hooks running cth-hook into a socket.

These pin down what the hook server relies on: which events arrive with which fields,
that a Bash call runs, and how the CLI feeds hook replies back to the model, in print
mode (-p) and in the interactive mode the office uses (a pty).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest

from hive_core.demo.claude_env import claude_environment, write_claude_config
from hive_core.demo.scripted_model import (
    RecordedRequest,
    Scenario,
    ScriptedModel,
    ToolUse,
    bash,
    has_tool_result,
    last_user_texts,
    turn,
    user_says,
)

VENV_BIN = Path(sys.executable).parent
CLAUDE = shutil.which("claude", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
CTH_HOOK = VENV_BIN / "cth-hook"
# Longer than 20 characters on purpose: the CLI approves a key by its last 20.
API_KEY = "sk-ant-scripted-0123456789abcdefghijklmnop"
HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]

Event = dict[str, Any]
Reply = Callable[[Event], dict[str, Any] | None]


def say(hook_output: dict[str, Any]) -> dict[str, Any]:
    """An office reply whose stdout is a hook's JSON output."""
    return {"exit": 0, "stdout": json.dumps(hook_output), "stderr": ""}


def context(event_name: str, text: str) -> dict[str, Any]:
    return say({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}})


class HookSocket:
    """A minimal office: one frame in, one reply out, every event recorded."""

    def __init__(self, path: str, reply: Reply) -> None:
        self.path = path
        self.reply = reply
        self.frames: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            frame = json.loads(conn.makefile("rb").readline())
            answer = self.reply(frame["event"]) or {"exit": 0, "stdout": "", "stderr": ""}
            conn.sendall(json.dumps(answer).encode() + b"\n")
            with self._arrived:
                self.frames.append(frame)
                self._arrived.notify_all()

    @property
    def events(self) -> list[Event]:
        with self._arrived:
            return [frame["event"] for frame in self.frames]

    def names(self) -> list[str]:
        return [event["hook_event_name"] for event in self.events]

    def wait_for(self, predicate: Callable[[list[str]], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not predicate(self.names()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"hook events so far: {self.names()}")
                self._arrived.wait(remaining)

    def close(self) -> None:
        self._sock.close()


@dataclass
class Desk:
    """One agent's surroundings: project folder, claude home, settings, office socket."""

    root: Path
    project: Path
    settings: Path
    config_dir: Path
    bin_dir: Path

    @property
    def hive_calls(self) -> list[str]:
        calls = self.bin_dir.parent / "hive-calls"
        return calls.read_text().splitlines() if calls.exists() else []

    def env(self, model: ScriptedModel, hooks: HookSocket) -> dict[str, str]:
        env = claude_environment(
            base_url=model.base_url, api_key=API_KEY, config_dir=self.config_dir
        )
        env.update(
            HIVE_SOCKET=hooks.path,
            HIVE_AGENT_ID="jim",
            HIVE_SECRET="secret-for-this-start",
            PATH=f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}",
            TERM="xterm-256color",
        )
        return env


@pytest.fixture
def desk(short_tmp: Path) -> Iterator[Desk]:
    # Short path: it holds the AF_UNIX socket (~108 bytes at most).
    root = short_tmp
    project = root / "project"
    project.mkdir()
    bin_dir = root / "bin"
    bin_dir.mkdir()
    # A stand-in `hive` CLI: proves the allow rule lets the model run it unprompted.
    hive = bin_dir / "hive"
    hive.write_text(f'#!/bin/sh\necho "$*" >> {root}/hive-calls\necho "1 unread: hello"\n')
    hive.chmod(0o755)
    config_dir = root / "claude-home"
    write_claude_config(config_dir, API_KEY, trusted=[project])
    hook = {"type": "command", "command": str(CTH_HOOK), "timeout": 10}
    settings = {
        "hooks": {name: [{"matcher": "*", "hooks": [hook]}] for name in HOOK_EVENTS},
        "permissions": {"allow": ["Bash(hive:*)", "Bash(touch:*)"]},
    }
    settings_path = root / "settings.json"
    settings_path.write_text(json.dumps(settings))
    yield Desk(root, project, settings_path, config_dir, bin_dir)


@pytest.fixture
def start_office(desk: Desk) -> Iterator[Callable[[Reply], HookSocket]]:
    sockets: list[HookSocket] = []

    def start(reply: Reply) -> HookSocket:
        sockets.append(HookSocket(str(desk.root / "office.sock"), reply))
        return sockets[-1]

    yield start
    for hooks in sockets:
        hooks.close()


def run_print_mode(desk: Desk, model: ScriptedModel, hooks: HookSocket, prompt: str) -> str:
    assert CLAUDE is not None
    child = pexpect.spawn(
        CLAUDE,
        ["-p", "--settings", str(desk.settings), prompt],
        cwd=str(desk.project),
        env=desk.env(model, hooks),
        encoding="utf-8",
        codec_errors="replace",
        timeout=120,
    )
    output = child.read()
    child.close()
    assert child.exitstatus == 0, output
    return output


def request_text(request: RecordedRequest) -> str:
    return json.dumps(request.body)


def stop_blocker(reason: str) -> Reply:
    """Block the first Stop with `reason`, let every later one through."""
    blocked: list[Event] = []

    def reply(event: Event) -> dict[str, Any] | None:
        if event["hook_event_name"] == "Stop" and not blocked:
            blocked.append(event)
            return say({"decision": "block", "reason": reason})
        return None

    return reply


def test_print_mode_hooks_bash_and_stop_block(desk: Desk, start_office) -> None:
    reason = "You have 1 unread message (m-1 from michael). Run `hive inbox`."
    scenario = Scenario(
        [
            turn(user_says("start the job"), "On it.", bash("touch ran-by-claude.txt")),
            turn(has_tool_result(), "Finished."),
            turn(user_says("Run `hive inbox`"), "Reading mail.", bash("hive inbox")),
            turn(has_tool_result(), "Mail read."),
        ]
    )
    hooks = start_office(stop_blocker(reason))
    with ScriptedModel(scenario) as model:
        output = run_print_mode(desk, model, hooks, "start the job")

        assert "Mail read." in output
        assert scenario.done
        # The Stop reply came back to the model as a new user turn.
        fed_back = model.main_requests[2]
        assert f"Stop hook feedback:\n{reason}" in last_user_texts(fed_back.body)

    assert (desk.project / "ran-by-claude.txt").exists()
    assert desk.hive_calls == ["inbox"]
    names = hooks.names()
    assert names[:2] == ["SessionStart", "UserPromptSubmit"]
    assert names.count("PreToolUse") == names.count("PostToolUse") == 2
    assert names.count("Stop") == 2 and names[-1] == "SessionEnd"
    stops = [e for e in hooks.events if e["hook_event_name"] == "Stop"]
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    assert {frame["agent"] for frame in hooks.frames} == {"jim"}
    assert {frame["secret"] for frame in hooks.frames} == {"secret-for-this-start"}
    session_ids = {e["session_id"] for e in hooks.events}
    assert len(session_ids) == 1
    post = next(e for e in hooks.events if e["hook_event_name"] == "PostToolUse")
    assert post["tool_name"] == "Bash"
    assert post["tool_input"]["command"] == "touch ran-by-claude.txt"


def test_print_mode_deny_and_context_reach_the_model(desk: Desk, start_office) -> None:
    def reply(event: Event) -> dict[str, Any] | None:
        name = event["hook_event_name"]
        if name == "PreToolUse" and event["tool_name"] == "WebFetch":
            return say(
                {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": "DENY-web: jim has no web access",
                    }
                }
            )
        if name in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
            return context(name, f"CTX-{name}")
        return None

    scenario = Scenario(
        [
            turn(
                user_says("look it up"),
                ToolUse("WebFetch", {"url": "https://example.com", "prompt": "title"}),
            ),
            turn(user_says("DENY-web"), "No web for me.", bash("hive inbox")),
            turn(user_says("CTX-PostToolUse"), "Done."),
        ]
    )
    hooks = start_office(reply)
    with ScriptedModel(scenario) as model:
        run_print_mode(desk, model, hooks, "look it up")
        assert scenario.done
        first = request_text(model.main_requests[0])
        assert "SessionStart hook additional context: CTX-SessionStart" in first
        assert "UserPromptSubmit hook additional context: CTX-UserPromptSubmit" in first
        denied = model.main_requests[1].body["messages"][-1]["content"][0]
        assert denied["type"] == "tool_result" and denied["is_error"] is True
        assert denied["content"] == "DENY-web: jim has no web access"
        assert "PostToolUse:Bash hook additional context: CTX-PostToolUse" in request_text(
            model.main_requests[2]
        )

    # A denied call never runs, so it has no PostToolUse.
    tools = [(e["hook_event_name"], e["tool_name"]) for e in hooks.events if "tool_name" in e]
    assert tools == [("PreToolUse", "WebFetch"), ("PreToolUse", "Bash"), ("PostToolUse", "Bash")]


def test_interactive_pty_starts_without_prompts_and_drains_on_stop(
    desk: Desk, start_office
) -> None:
    assert CLAUDE is not None
    session_id = str(uuid.uuid4())
    scenario = Scenario(
        [
            turn(user_says("typed prompt"), "Working.", bash("touch typed.txt")),
            turn(has_tool_result(), "Finished."),
            turn(user_says("Run `hive inbox`"), "Reading mail.", bash("hive inbox")),
            turn(has_tool_result(), "Mail read."),
        ]
    )
    hooks = start_office(stop_blocker("1 unread message. Run `hive inbox`."))
    with ScriptedModel(scenario) as model:
        child = pexpect.spawn(
            CLAUDE,
            ["--settings", str(desk.settings), "--session-id", session_id],
            cwd=str(desk.project),
            env=desk.env(model, hooks),
            dimensions=(40, 120),
            encoding="utf-8",
            codec_errors="replace",
        )
        try:
            drain = threading.Thread(target=_drain, args=(child,), daemon=True)
            drain.start()
            # No onboarding, API-key or trust screen: the session starts by itself.
            hooks.wait_for(lambda names: "SessionStart" in names)
            # Text and Enter apart, as the office's wake path types them.
            child.send("typed prompt")
            time.sleep(0.5)
            child.send("\r")
            hooks.wait_for(lambda names: names.count("Stop") == 2)
            assert scenario.done
            assert model.wait_for(lambda r: r.kind == "side").body["tools"] == []
            child.send("/exit")
            time.sleep(0.5)
            child.send("\r")
            hooks.wait_for(lambda names: "SessionEnd" in names, timeout=30)
        finally:
            child.terminate(force=True)

    assert (desk.project / "typed.txt").exists()
    assert desk.hive_calls == ["inbox"]
    events = hooks.events
    assert {e["session_id"] for e in events} == {session_id}
    start = events[0]
    assert start["hook_event_name"] == "SessionStart" and start["source"] == "startup"
    assert events[-1]["reason"] == "prompt_input_exit"
    prompt = next(e for e in events if e["hook_event_name"] == "UserPromptSubmit")
    assert prompt["prompt"] == "typed prompt"


def _drain(child: pexpect.spawn) -> None:
    # The CLI blocks on a full pty; keep reading its screen until it exits.
    while True:
        try:
            child.read_nonblocking(65536, timeout=0.5)
        except pexpect.TIMEOUT:
            continue
        except (pexpect.EOF, OSError, ValueError):
            return
