"""A remote desk's usage, the pure parts: where its records are on the host, the probe's
reply, and the cursors the office keeps for files it never opens itself."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgspec

from hive_core.agents.usage import PASS_READ_MAX, UsageBook, claude_parser, codex_parser
from hive_core.cost.remote_usage import (
    BEGIN,
    END,
    REPLY_DATA_MAX,
    Chunk,
    Query,
    RemoteUsage,
    apply_reply,
    parse_reply,
    probe_command,
    quiet_delay,
    where_on_host,
)
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.schema import AgentSpec

HOST = "gpu1.lab"


def assistant(msg_id: str, output: int = 10) -> bytes:
    line = {
        "type": "assistant",
        "timestamp": "2026-12-01T07:00:00Z",
        "message": {
            "id": msg_id,
            "model": "claude-sonnet-4-5",
            "usage": {"input_tokens": 100, "output_tokens": output},
        },
    }
    return json.dumps(line).encode()


def reply(*files: dict[str, object], banner: bytes = b"", end: bool = True) -> bytes:
    lines = [banner + BEGIN] if banner else [BEGIN]
    for f in files:
        data = base64.b64encode(f["data"]).decode()  # type: ignore[arg-type]
        lines.append(json.dumps({**f, "data": data}).encode())
    if end:
        lines.append(END)
    return b"\n".join(lines) + b"\n"


def chunk(data: bytes, offset: int = 0, size: int | None = None, ino: int = 7) -> dict[str, object]:
    return {
        "path": "/h/.claude/projects/-w/s1.jsonl",
        "dev": 1,
        "ino": ino,
        "size": offset + len(data) if size is None else size,
        "offset": offset,
        "data": data,
    }


def chunks(*files: dict[str, object]) -> list[Chunk]:
    parsed = parse_reply(reply(*files))
    assert parsed is not None
    return parsed


def test_a_reply_is_read_after_a_banner_and_only_when_whole() -> None:
    body = b"line one\n\x00binary\xff"
    parsed = parse_reply(reply(chunk(body), banner=b"Welcome to gpu1!\n"))
    assert parsed == [
        Chunk(
            path="/h/.claude/projects/-w/s1.jsonl",
            dev=1,
            ino=7,
            size=len(body),
            offset=0,
            data=body,
        )
    ]
    assert parse_reply(reply()) == []
    # Cut short (the link dropped mid-reply), no reply at all, or a line that is no file's.
    assert parse_reply(reply(chunk(body), end=False)) is None
    assert parse_reply(b"") is None
    assert parse_reply(b"bash: /x/bin/python: No such file or directory\n") is None
    assert parse_reply(BEGIN + b"\n{not json\n" + END + b"\n") is None
    assert parse_reply(BEGIN + b'\n{"path": "/p", "data": "!!"}\n' + END + b"\n") is None


def test_bytes_from_the_host_are_read_once_and_only_whole_lines() -> None:
    book = UsageBook()
    first, second = assistant("msg_1"), assistant("msg_2", output=7)
    assert apply_reply(book, "pam", chunks(chunk(first + b"\n" + second[:30])), claude_parser)
    assert [r.key for r in book.records("pam")] == ["msg_1"]
    path = "/h/.claude/projects/-w/s1.jsonl"
    # The office asks for what follows the bytes it has, partial line included.
    assert book.offsets("pam") == {path: (1, 7, len(first) + 1 + 30)}
    at = len(first) + 1 + 30
    assert apply_reply(book, "pam", chunks(chunk(second[30:] + b"\n", offset=at)), claude_parser)
    assert sorted((r.key, r.tokens.output) for r in book.records("pam")) == [
        ("msg_1", 10),
        ("msg_2", 7),
    ]
    # The same bytes again (a reply to a stale question) are dropped, not counted twice.
    size = len(first) + len(second) + 2
    again = chunk(second[30:] + b"\n", offset=at)
    assert not apply_reply(book, "pam", chunks(again), claude_parser)
    assert not apply_reply(book, "pam", chunks(chunk(first, offset=0, size=size)), claude_parser)
    assert sum(r.tokens.output for r in book.records("pam")) == 17
    assert book.offsets("pam")[path] == (1, 7, size)
    assert book.offsets("jim") == {}


def test_a_replaced_or_shortened_file_on_the_host_is_read_from_its_start() -> None:
    book = UsageBook()
    apply_reply(book, "pam", chunks(chunk(assistant("msg_1") + b"\n")), claude_parser)
    replaced = assistant("msg_9") + b"\n"
    # Another inode: the host read it from 0, and so does the office's cursor.
    assert apply_reply(book, "pam", chunks(chunk(replaced, ino=8)), claude_parser)
    assert sorted(r.key for r in book.records("pam")) == ["msg_1", "msg_9"]
    # Same inode but shorter than the office's offset: truncated, read again from 0.
    short = assistant("m3") + b"\n"
    assert len(short) < len(replaced)
    assert apply_reply(book, "pam", chunks(chunk(short, ino=8)), claude_parser)
    assert book.offsets("pam")["/h/.claude/projects/-w/s1.jsonl"] == (1, 8, len(short))
    # Bytes that start where the office did not leave the file wait for the next ask.
    assert not apply_reply(book, "pam", chunks(chunk(b"x\n", offset=3, ino=8)), claude_parser)


def test_where_a_claude_desk_keeps_its_transcripts_on_its_host(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    spec = AgentSpec(
        id="pam",
        name="Pam",
        host=HOST,
        env={"CLAUDE_CONFIG_DIR": "~/cfg", "ANTHROPIC_API_KEY": "k"},
    )
    where = where_on_host(spec, paths, ["s1", "we[ird]*"])
    assert where is not None and where.parser is claude_parser
    query = where.query
    # The roster's config dir wins over the host's; its key never goes to the probe.
    assert (query.var, query.root, query.env) == (
        "CLAUDE_CONFIG_DIR",
        "~/.claude",
        {"CLAUDE_CONFIG_DIR": "~/cfg"},
    )
    assert query.globs == [
        "projects/*/s1.jsonl",
        "projects/*/s1/subagents/*.jsonl",
        "projects/*/we[[]ird][*].jsonl",
        "projects/*/we[[]ird][*]/subagents/*.jsonl",
    ]
    assert (query.file_max, query.reply_max) == (PASS_READ_MAX, REPLY_DATA_MAX)
    assert REPLY_DATA_MAX <= PASS_READ_MAX


def test_where_a_codex_desk_keeps_its_rollouts_on_its_host(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    spec = AgentSpec(id="dwight", name="Dwight", provider="codex", host=HOST)
    where = where_on_host(spec, paths, ["019a-uuid"])
    assert where is not None and where.parser is codex_parser
    rdir = plan.rdir_relative(plan.office_key(paths.home), "dwight")
    assert where.query.root == f"~/{rdir}/files/agent-settings/codex/dwight"
    assert where.query.var is None
    assert where.query.globs == ["sessions/**/rollout-*.jsonl"]


def test_no_probe_without_a_session_a_host_or_records_to_read(short_tmp: Path) -> None:
    # Short: the desk's ControlPath must fit a socket path, or ssh is told not to share.
    paths = HivePaths(short_tmp / "home")
    claude = AgentSpec(id="pam", name="Pam", host=HOST)
    assert where_on_host(claude, paths, []) is None
    for provider in ("shell", "gemini"):
        spec = AgentSpec(id="x", name="X", provider=provider, host=HOST)  # type: ignore[arg-type]
        assert where_on_host(spec, paths, ["s1"]) is None
    local = AgentSpec(id="jim", name="Jim")
    book = UsageBook()
    apply_reply(book, "pam", chunks(chunk(assistant("msg_1") + b"\n")), claude_parser)
    asks = RemoteUsage().asks(
        book,
        [claude, local, AgentSpec(id="kev", name="Kev", host=HOST)],
        paths,
        {"pam": ["s1"], "jim": ["s2"], "kev": []},
        "~/.venvs/hive",
    )
    # One ask: pam's, with the offsets the office has, over the desk's own connection.
    assert [a.agent for a in asks] == ["pam"]
    ask = asks[0]
    assert ask.query.known == book.offsets("pam")
    assert ask.argv[-2:] == [HOST, probe_command("~/.venvs/hive")]
    assert f"ControlPath={paths.ssh_master('pam')}" in ask.argv
    assert "ControlMaster=no" in ask.argv
    sent = msgspec.json.decode(msgspec.json.encode(ask.query), type=Query)
    assert sent == ask.query


def test_the_probe_runs_the_remote_venvs_python_isolated() -> None:
    assert probe_command("~/.venvs/hive").startswith('exec "$HOME"/.venvs/hive/bin/python -I -c ')
    assert probe_command("/opt/hive venv").startswith("exec '/opt/hive venv/bin/python' -I -c ")


def test_a_quiet_desk_is_asked_less_often_and_at_once_when_its_sessions_change(
    tmp_path: Path,
) -> None:
    now = [100.0]
    remote = RemoteUsage(clock=lambda: now[0])
    paths = HivePaths(tmp_path / "home")
    pam = AgentSpec(id="pam", name="Pam", host=HOST)

    def asked(sessions: list[str]) -> bool:
        return bool(remote.asks(UsageBook(), [pam], paths, {"pam": sessions}, "~/v"))

    assert [quiet_delay(q) for q in range(7)] == [0, 5, 10, 20, 40, 60, 60]
    assert asked(["s1"])
    remote.heard("pam", grew=False)  # nothing new: not before 5 s
    assert not asked(["s1"])
    now[0] += 5
    assert asked(["s1"])
    remote.heard("pam", grew=False)  # still nothing: 10 s
    now[0] += 9
    assert not asked(["s1"])
    assert asked(["s1", "s2"])  # a new session: at once
    remote.heard("pam", grew=True)  # it works: every pass again
    assert asked(["s1", "s2"])
    remote.heard("pam", grew=False)
    assert not asked(["s1", "s2"])
    remote.busy = lambda agent: agent == "pam"  # the office sees it working
    assert asked(["s1", "s2"])
