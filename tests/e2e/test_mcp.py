"""`hive mcp` through a real MCP client session over stdio (the `mcp` package's client).

Each test starts `hive mcp` as a subprocess with an agent's environment, against an
office made by init_office with no office process running (except where the secret
check needs one), as an agent CLI would start it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO
from unittest import mock
from uuid import uuid4

import anyio
import msgspec
import pytest
from anyio.abc import Process
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client import stdio as mcp_stdio

from hive_core.agents.claude import ClaudeProvider
from hive_core.agents.provider import LaunchContext
from hive_core.demo.claude_env import claude_environment, write_claude_config
from hive_core.demo.scripted_model import (
    Scenario,
    ScriptedModel,
    ToolUse,
    has_tool_result,
    last_user_texts,
    tool_result_says,
    turn,
    user_says,
)
from hive_core.mail import message_files
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, Draft, Message

VENV_BIN = Path(sys.executable).parent
HIVE = str(VENV_BIN / "hive")
SAME = "the deploy key rotates every friday at noon"


def agent_env(paths: HivePaths, agent_id: str | None, secret: str = "") -> dict[str, str]:
    env = {"HIVE_HOME": str(paths.home), "HIVE_SECRET": secret}
    if agent_id is not None:
        env["HIVE_AGENT_ID"] = agent_id
    return env


# Puts the server in a process group of its own (the MCP client's teardown signals that
# group) without the new session the client would start.
_OWN_GROUP = "import os, sys; os.setpgid(0, 0); os.execv(sys.argv[1], sys.argv[1:])"


async def _spawn_in_this_session(
    command: str,
    args: list[str],
    env: dict[str, str] | None = None,
    errlog: TextIO = sys.stderr,
    cwd: Path | str | None = None,
) -> Process:
    """The MCP client's spawn, in the test's session. Tests with the `running` fixture are
    the office's own process: a child of it in another session is a stray, which acts for
    nobody (hive_core/control.py), where a person's MCP host is not below the office."""
    return await anyio.open_process(
        [sys.executable, "-c", _OWN_GROUP, command, *args], env=env, stderr=errlog, cwd=cwd
    )


@asynccontextmanager
async def session(
    paths: HivePaths, agent_id: str, secret: str = ""
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=HIVE, args=["mcp"], env=agent_env(paths, agent_id, secret)
    )
    with mock.patch.object(
        mcp_stdio, "_create_platform_compatible_process", _spawn_in_this_session
    ):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


async def call(client: ClientSession, tool: str, **arguments: Any) -> Any:
    """A tool's structured result; a list comes wrapped as {"result": [...]}."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data = result.structured_content
    return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data


async def refusal(client: ClientSession, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


def owners(hits: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(hit["source"], hit["owner"]) for hit in hits}


async def test_tools_are_listed_and_none_takes_an_identity(office_home: HivePaths) -> None:
    async with session(office_home, "jim") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        scopes = await call(client, "list_scopes")
    assert set(tools) == {
        "memory_write",
        "memory_query",
        "memory_forget",
        "memory_edit",
        "list_scopes",
        "send",
        "inbox",
    }
    for tool in tools.values():
        assert not {"caller", "agent", "agent_id", "owner", "sender"} & set(
            tool.input_schema.get("properties", {})
        )
    assert scopes["caller"] == "jim"
    assert [s["name"] for s in scopes["scopes"]] == ["own", "office", "all"]


async def test_scopes_over_identical_text(running: Any) -> None:
    # The same words in jim's note, pam's note and the board: ranking cannot decide,
    # only the scope can. Writing memory needs the office to prove the writer.
    office_home: HivePaths = running.office.paths
    secret = {a: running.office.states[a].secret for a in ("jim", "pam")}
    office_home.board.write_text(f"# Board\n\n- {SAME}\n")
    async with session(office_home, "jim", secret["jim"]) as jim:
        written = await call(jim, "memory_write", text=SAME)
        assert written["path"] == "agents/jim/memory/notes.md"
    async with session(office_home, "pam", secret["pam"]) as pam:
        await call(pam, "memory_write", text=SAME)
        assert owners(await call(pam, "memory_query", query=SAME, scope="own")) == {("note", "pam")}
    async with session(office_home, "jim") as jim:
        own = await call(jim, "memory_query", query=SAME, scope="own")
        office = await call(jim, "memory_query", query=SAME, scope="office")
        everything = await call(jim, "memory_query", query="DEPLOY keys rotate", scope="all")
        bad_scope = await refusal(jim, "memory_query", query=SAME, scope="pam")
    assert owners(own) == {("note", "jim")}
    assert owners(office) == {("board", "office")}
    assert owners(everything) == {("note", "jim"), ("board", "office")}
    assert all(hit["owner"] != "pam" for hit in own + office + everything)
    assert "own" in bad_scope and "office" in bad_scope


async def test_an_identity_argument_is_ignored_never_obeyed(running: Any) -> None:
    office_home: HivePaths = running.office.paths
    pam_notes = office_home.mailbox("pam").notes.read_text()
    async with session(office_home, "jim", running.office.states["jim"].secret) as jim:
        result = await jim.call_tool("memory_write", {"text": "mine", "agent_id": "pam"})
    assert office_home.mailbox("pam").notes.read_text() == pam_notes
    if not result.is_error:
        assert "mine" in office_home.mailbox("jim").notes.read_text()


@pytest.mark.parametrize(
    ("agent_id", "why"),
    [("", "empty"), ("   ", "empty"), ("dwight", "not an agent of this office")],
)
def test_refuses_to_start_for_an_empty_or_unknown_caller(
    office_home: HivePaths, agent_id: str, why: str
) -> None:
    done = subprocess.run(
        [HIVE, "mcp"],
        env={**os.environ, **agent_env(office_home, agent_id)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # stdout is the protocol's: nothing else goes there
    assert why in done.stderr and "not starting" in done.stderr


async def test_a_client_cannot_open_a_session_for_an_unknown_caller(
    office_home: HivePaths,
) -> None:
    # The server exits before answering `initialize`: the client sees the pipe close.
    with pytest.raises(ExceptionGroup) as caught:
        async with session(office_home, "dwight"):
            pass
    assert caught.value.subgroup(MCPError) is not None


def test_refuses_an_unproven_caller_while_the_office_runs(running: Any) -> None:
    paths = running.office.paths
    done = subprocess.run(
        [HIVE, "mcp"],
        env={**os.environ, **agent_env(paths, "jim", secret="not-jims-secret")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "cannot prove it is jim" in done.stderr


async def test_a_proven_caller_is_served_while_the_office_runs(running: Any) -> None:
    paths = running.office.paths
    secret = running.office.states["jim"].secret
    async with session(paths, "jim", secret) as jim:
        assert (await call(jim, "list_scopes"))["caller"] == "jim"


async def test_send_puts_one_valid_draft_in_the_callers_outbox(office_home: HivePaths) -> None:
    outbox = office_home.mailbox("jim").outbox
    async with session(office_home, "jim") as jim:
        queued = await call(
            jim, "send", to="pam", act="request", subject=" Review ", body="the lexer"
        )
        to_self = await refusal(jim, "send", to="jim", body="hello me")
        nobody = await refusal(jim, "send", to="dwight", body="hi")
        empty = await refusal(jim, "send", to="pam")
        bad_act = await refusal(jim, "send", to="pam", act="shout", body="hi")
    files = message_files(outbox)
    assert [str(f.relative_to(office_home.hive)) for f in files] == [queued["path"]]
    assert queued["delivered_now"] is False  # no office running: it waits in the outbox
    draft = msgspec.json.decode(files[0].read_bytes(), type=Draft)
    assert (draft.to, draft.act, draft.subject, draft.body) == (
        "pam",
        "request",
        "Review",
        "the lexer",
    )
    assert "yourself" in to_self and "dwight" in nobody and "empty" in empty
    assert "act" in bad_act
    assert message_files(office_home.mailbox("pam").outbox) == []


async def test_inbox_lists_only_the_callers_unread_mail(office_home: HivePaths) -> None:
    message = Message(
        id="20261130T090000000000Z-aaaaaa",
        conversation="20261130T090000000000Z-aaaaaa",
        in_reply_to=None,
        sender="michael",
        to="jim",
        act="request",
        subject="Standup",
        body="What are you on?",
        created_at="2026-11-30T09:00:00Z",
    )
    inbox = office_home.mailbox("jim").inbox
    (inbox / f"{message.id}.json").write_bytes(msgspec.json.encode(message))
    async with session(office_home, "jim") as jim:
        mine = await call(jim, "inbox")
    async with session(office_home, "pam") as pam:
        theirs = await call(pam, "inbox")
    assert [(m["id"], m["sender"], m["subject"], m["body"]) for m in mine] == [
        (message.id, "michael", "Standup", "What are you on?")
    ]
    assert theirs == []


def test_claude_agents_get_the_server_and_its_tools_allowed(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    (bin_dir / "hive").write_text("#!/bin/sh\n")
    (bin_dir / "hive").chmod(0o755)
    ctx = LaunchContext(
        paths=paths,
        agent=AgentSpec(id="jim", name="Jim", cwd=str(tmp_path)),
        secret="s3cret",
        session_id=str(uuid4()),
        resume=False,
        system_prompt="You are Jim.",
        hook_command=["/abs/python", "/abs/cth_hook"],
        path_prepend=[str(bin_dir)],
        base_env={"PATH": "/usr/bin", "HOME": str(tmp_path)},
        first_prompt="Start.",
    )
    launch = ClaudeProvider().prepare(ctx)
    config_file = paths.agent_settings / "jim.mcp.json"
    assert f"--mcp-config={config_file}" in launch.argv
    # Before `--`: the first prompt stays the prompt.
    assert launch.argv.index(f"--mcp-config={config_file}") < launch.argv.index("--")
    assert "--strict-mcp-config" not in launch.argv  # the user's own servers still load
    config = json.loads(config_file.read_text())
    assert config == {
        "mcpServers": {"hive": {"command": str(bin_dir / "hive"), "args": ["mcp"], "type": "stdio"}}
    }
    assert "s3cret" not in config_file.read_text()
    settings = json.loads((paths.agent_settings / "jim.json").read_text())
    assert "mcp__hive" in settings["permissions"]["allow"]


CLAUDE = shutil.which("claude", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
API_KEY = "sk-ant-scripted-0123456789abcdefghijklmnop"


@pytest.mark.integration
@pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)")
def test_a_claude_agent_uses_the_tools_without_a_prompt(running: Any) -> None:
    """The real claude, launched with what ClaudeProvider.prepare wrote, starts `hive mcp`
    as jim and calls its tools unprompted (print mode denies anything not allowed)."""
    assert CLAUDE is not None
    office_home: HivePaths = running.office.paths
    project = office_home.home.parent / "project"
    project.mkdir()
    ctx = LaunchContext(
        paths=office_home,
        agent=AgentSpec(id="jim", name="Jim", cwd=str(project), command=[CLAUDE]),
        secret=running.office.states["jim"].secret,
        session_id=str(uuid4()),
        resume=False,
        system_prompt="You are Jim.",
        hook_command=[str(VENV_BIN / "cth-hook")],
        path_prepend=[str(VENV_BIN)],
        base_env=dict(os.environ),
    )
    launch = ClaudeProvider().prepare(ctx)
    config_dir = office_home.home.parent / "claude-home"
    write_claude_config(config_dir, API_KEY, trusted=[project])
    scenario = Scenario(
        [
            # In print mode the CLI may ask the model before `hive mcp` has connected;
            # the model then retries, as a real one would.
            turn(
                user_says("remember"),
                ToolUse("mcp__hive__memory_write", {"text": SAME}),
                again_if=tool_result_says("still connecting"),
            ),
            turn(has_tool_result(), ToolUse("mcp__hive__list_scopes", {})),
            turn(has_tool_result(), "Noted."),
        ]
    )
    with ScriptedModel(scenario) as model:
        env = claude_environment(
            base_url=model.base_url, api_key=API_KEY, config_dir=config_dir, base=launch.env
        )
        # Print mode connects MCP servers in the background by default, so on a loaded
        # machine the first turn can start before `hive mcp` is up ("No such tool").
        env["MCP_CONNECTION_NONBLOCKING"] = "false"
        options = [a for a in launch.argv[1:] if a.startswith("--mcp-config=")]
        settings = launch.argv[launch.argv.index("--settings") + 1]
        done = subprocess.run(
            [CLAUDE, "-p", "--settings", settings, *options, "--", "remember the key rotation"],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert scenario.done
        results = [last_user_texts(r.body) for r in model.main_requests[1:]]
    # The last two requests answer the write that went through and list_scopes.
    assert "agents/jim/memory/notes.md" in " ".join(results[-2])
    assert '"caller":"jim"' in " ".join(results[-1]).replace(" ", "")
    assert SAME in office_home.mailbox("jim").notes.read_text()
