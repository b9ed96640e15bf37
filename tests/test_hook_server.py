"""The hook socket with the real shim: authentication, replies, registry and log effects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hive_core.mail import write_draft
from hive_core.paths import HivePaths
from hive_core.schema import Draft
from tests.conftest import Running

SHIM = [sys.executable, "-I", "-S", str(Path(__file__).parents[1] / "cth_hook" / "__main__.py")]


def hook(
    running: Running, agent: str, event: dict[str, object], secret: str | None = None
) -> subprocess.CompletedProcess[str]:
    paths = running.office.paths
    env = {
        "PATH": os.environ["PATH"],
        "HIVE_AGENT_ID": agent,
        "HIVE_SECRET": secret if secret is not None else running.office.states[agent].secret,
        "HIVE_SOCKET": str(paths.hook_socket),
    }
    return subprocess.run(
        SHIM, input=json.dumps(event), env=env, capture_output=True, text=True, timeout=10
    )


def registry(paths: HivePaths) -> dict[str, dict[str, object]]:
    return {a["id"]: a for a in json.loads(paths.registry.read_text())["agents"]}


def wait(predicate, what: str, timeout: float = 10):  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError(what)


def test_socket_and_folder_are_private(running: Running) -> None:
    paths = running.office.paths
    assert paths.hook_socket.stat().st_mode & 0o777 == 0o600
    assert paths.run.stat().st_mode & 0o777 == 0o700


def test_session_start_records_session_and_answers_with_context(running: Running) -> None:
    out = hook(
        running, "jim", {"hook_event_name": "SessionStart", "session_id": "s-42", "cwd": "/tmp"}
    )
    assert out.returncode == 0
    reply = json.loads(out.stdout)
    context = reply["hookSpecificOutput"]["additionalContext"]
    assert "You are Jim (id jim)" in context and "inbox is empty" in context
    paths = running.office.paths
    wait(lambda: registry(paths)["jim"]["session_id"] == "s-42", "registry update")
    assert registry(paths)["jim"]["status"] == "idle"


def test_stop_blocks_with_unread_mail(running: Running) -> None:
    paths = running.office.paths
    write_draft(
        paths.mailbox("pam"), Draft(to="jim", act="request", subject="review PR 9", body="b")
    )
    running.office.router.scan_all()
    out = hook(running, "jim", {"hook_event_name": "Stop", "stop_hook_active": False})
    reply = json.loads(out.stdout)
    assert (
        reply["decision"] == "block"
        and "review PR 9" in reply["reason"]
        and "from pam" in reply["reason"]
    )


def test_deny_is_rendered_for_claude(running: Running) -> None:
    out = hook(
        running,
        "jim",
        {"hook_event_name": "PreToolUse", "tool_name": "WebSearch", "tool_input": {"query": "x"}},
    )
    decision = json.loads(out.stdout)["hookSpecificOutput"]
    assert (
        decision["permissionDecision"] == "deny" and "pete" in decision["permissionDecisionReason"]
    )


@pytest.mark.parametrize("secret", ["wrong", "x" * 5000])
def test_wrong_secret_gets_nothing_and_is_logged(running: Running, secret: str) -> None:
    paths = running.office.paths
    before = registry(paths)["jim"]
    out = hook(running, "jim", {"hook_event_name": "SessionEnd"}, secret=secret)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    wait(lambda: "wrong or stale secret" in paths.log.read_text(), "the refusal in the log")
    assert registry(paths)["jim"] == before


def test_unknown_agent_and_stale_secret_are_refused(running: Running) -> None:
    paths = running.office.paths
    old = running.office.states["jim"].secret
    running.office.states["jim"].new_secret()  # a restart: the old process's secret is stale
    assert hook(running, "jim", {"hook_event_name": "SessionEnd"}, secret=old).stdout == ""
    assert hook(running, "toby", {"hook_event_name": "SessionEnd"}, secret=old).stdout == ""
    assert registry(paths)["jim"]["status"] != "exited"


def test_secrets_never_reach_the_hive(running: Running) -> None:
    hook(running, "jim", {"hook_event_name": "SessionStart", "session_id": "s"})
    secrets = [s.secret for s in running.office.states.values()]
    for path in running.office.paths.hive.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            text = path.read_bytes()
            assert not any(s.encode() in text for s in secrets), path
