"""Token usage, read from the agent CLIs' own records (their transcripts), incrementally.

Each provider names the files that hold an agent's usage and parses one line of them
(`Provider.usage_source`); this module keeps a cursor per file so a pass reads only
what was appended since the last one, and keeps one record per API call (a CLI that
writes the same message several times while it streams counts once: the later line
replaces the earlier). Only whole lines are consumed; a line still being written is
kept back until its newline arrives. Pricing is hive_core/cost/'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

# A line longer than this is not a usage record (a transcript line carrying a large tool
# result or an image); it is skipped without being held in memory.
LINE_MAX = 32 * 1024 * 1024
# How much of a file one pass reads at most: a long transcript is caught up over passes.
PASS_READ_MAX = 64 * 1024 * 1024


class Tokens(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens of one API call or a sum. `input` excludes cached input (Anthropic's
    input_tokens; OpenAI's input_tokens minus cached_input_tokens)."""

    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_write=self.cache_write + other.cache_write,
            cache_read=self.cache_read + other.cache_read,
        )

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_write + self.cache_read


class UsageRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One API call: `key` identifies it across duplicate lines, `ts` is ISO 8601 UTC."""

    key: str
    ts: str
    model: str
    tokens: Tokens


# A parser for one file: fed its lines in order, returns the record a line carries.
LineParser = Callable[[bytes], UsageRecord | None]


@dataclass(frozen=True)
class UsageSource:
    """Where an agent's usage is: the files there now, and a new parser per file."""

    files: list[Path]
    parser: Callable[[Path], LineParser]


# --- Claude Code: <config dir>/projects/<slug>/<session>.jsonl ----------------------------


class _ClaudeUsage(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0


class _ClaudeMessage(msgspec.Struct):
    usage: _ClaudeUsage | None = None
    id: str | None = None
    model: str = ""


class _ClaudeLine(msgspec.Struct):
    type: str = ""
    message: _ClaudeMessage | None = None
    requestId: str | None = None
    uuid: str | None = None
    timestamp: str = ""


_claude_line = msgspec.json.Decoder(_ClaudeLine)


def claude_parser(_path: Path) -> LineParser:
    # Keys are message ids, the same in every file: a message copied into a resumed
    # session's transcript still counts once.
    return claude_line


def claude_line(line: bytes) -> UsageRecord | None:
    """An assistant line's usage. Claude Code writes one line per content block of a
    message, each with the message's id and usage so far: the key is the message id."""
    if b'"usage"' not in line:
        return None
    try:
        parsed = _claude_line.decode(line)
    except msgspec.DecodeError:
        return None
    message = parsed.message
    if parsed.type != "assistant" or message is None or message.usage is None:
        return None
    # The CLI's own error notices are written as assistant messages of this model.
    if message.model == "<synthetic>":
        return None
    key = message.id or parsed.requestId or parsed.uuid
    if not key:
        return None
    u = message.usage
    tokens = Tokens(
        input=u.input_tokens,
        output=u.output_tokens,
        cache_write=u.cache_creation_input_tokens or 0,
        cache_read=u.cache_read_input_tokens or 0,
    )
    return UsageRecord(key=key, ts=parsed.timestamp, model=message.model, tokens=tokens)


def claude_files(config_dir: Path, sessions: Iterable[str]) -> list[Path]:
    """The transcripts of these sessions, in any project folder, with their subagents'."""
    projects = config_dir / "projects"
    found: list[Path] = []
    try:
        folders = [e.path for e in os.scandir(projects) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for session in sessions:
        for folder in folders:
            transcript = Path(folder, f"{session}.jsonl")
            if transcript.is_file():
                found.append(transcript)
            found += sorted(Path(folder, session, "subagents").glob("*.jsonl"))
    return found


# --- Codex: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl --------------------------------


class _CodexTokens(msgspec.Struct):
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class _CodexInfo(msgspec.Struct):
    total_token_usage: _CodexTokens | None = None
    last_token_usage: _CodexTokens | None = None


class _CodexPayload(msgspec.Struct):
    type: str = ""
    info: _CodexInfo | None = None
    model: str | None = None


class _CodexLine(msgspec.Struct):
    timestamp: str = ""
    type: str = ""
    payload: _CodexPayload | None = None


_codex_line = msgspec.json.Decoder(_CodexLine)


class _CodexParser:
    """Codex logs a `token_count` event after each model call with the call's usage
    (`last_token_usage`) and the session's running total; it repeats the event without
    a new call (rate-limit updates), so only an event whose total moved counts. The
    model comes from the latest `turn_context`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.model = ""
        self.total: _CodexTokens | None = None
        self.line = 0

    def __call__(self, line: bytes) -> UsageRecord | None:
        self.line += 1
        if b'"turn_context"' not in line and b'"token_count"' not in line:
            return None
        try:
            parsed = _codex_line.decode(line)
        except msgspec.DecodeError:
            return None
        payload = parsed.payload
        if payload is None:
            return None
        if parsed.type == "turn_context" and payload.model:
            self.model = payload.model
            return None
        if payload.type != "token_count" or payload.info is None:
            return None
        total, last = payload.info.total_token_usage, payload.info.last_token_usage
        if total is None or last is None or total == self.total:
            return None
        self.total = total
        cached = min(last.cached_input_tokens, last.input_tokens)
        tokens = Tokens(
            input=last.input_tokens - cached, output=last.output_tokens, cache_read=cached
        )
        # Lines are never rewritten: the file and the line's number are a stable key.
        return UsageRecord(
            key=f"{self.path}:{self.line}", ts=parsed.timestamp, model=self.model, tokens=tokens
        )


def codex_parser(path: Path) -> LineParser:
    return _CodexParser(path)


def codex_files(codex_home: Path) -> list[Path]:
    return sorted((codex_home / "sessions").glob("**/rollout-*.jsonl"))


# --- reading incrementally ------------------------------------------------------------------


@dataclass
class _Cursor:
    identity: tuple[int, int]  # (device, inode): a replaced file is read again from 0
    parse: LineParser
    offset: int = 0
    pending: bytearray = field(default_factory=bytearray)
    skipping: bool = False  # inside a line longer than LINE_MAX


class UsageBook:
    """Every usage record read so far, per agent, one per API call; and where each file
    was left. Not thread-safe: one pass at a time (the office's usage thread)."""

    def __init__(self) -> None:
        self._cursors: dict[tuple[str, Path], _Cursor] = {}
        self._records: dict[str, dict[str, UsageRecord]] = {}

    def records(self, agent: str) -> list[UsageRecord]:
        return list(self._records.get(agent, {}).values())

    def all_records(self) -> dict[str, list[UsageRecord]]:
        return {agent: list(records.values()) for agent, records in self._records.items()}

    def read(self, agent: str, source: UsageSource) -> bool:
        """Read what was appended to the agent's files; True if any record changed."""
        changed = False
        for path in source.files:
            changed |= self._read_file(agent, path, source.parser)
        return changed

    def _read_file(self, agent: str, path: Path, parser: Callable[[Path], LineParser]) -> bool:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino)
            start = self._cursor(agent, path, identity, st.st_size, parser).offset
            if st.st_size == start:
                return False
            data = os.pread(fd, min(st.st_size - start, PASS_READ_MAX), start)
        finally:
            os.close(fd)
        return self.take(agent, path, identity, st.st_size, start, data, parser)

    def _cursor(
        self,
        agent: str,
        path: Path,
        identity: tuple[int, int],
        size: int,
        parser: Callable[[Path], LineParser],
    ) -> _Cursor:
        """The file's cursor, a new one at 0 if the file was replaced or cut shorter."""
        cursor = self._cursors.get((agent, path))
        if cursor is None or cursor.identity != identity or size < cursor.offset:
            cursor = _Cursor(identity=identity, parse=parser(path))
            self._cursors[(agent, path)] = cursor
        return cursor

    def offsets(self, agent: str) -> dict[str, tuple[int, int, int]]:
        """Where each of the agent's files was left: path -> (device, inode, offset). A
        reader elsewhere (a remote desk's host) is asked only for what follows."""
        return {
            str(path): (*cursor.identity, cursor.offset)
            for (owner, path), cursor in self._cursors.items()
            if owner == agent
        }

    def take(
        self,
        agent: str,
        path: Path,
        identity: tuple[int, int],
        size: int,
        start: int,
        data: bytes,
        parser: Callable[[Path], LineParser],
    ) -> bool:
        """Consume `data`, the bytes at `start` of a file that is `size` bytes long now;
        True if any record changed. Bytes that do not start where the file was left
        (read before a reset this side did not see) are dropped, to be asked for again."""
        cursor = self._cursor(agent, path, identity, size, parser)
        if start != cursor.offset or not data:
            return False
        cursor.offset += len(data)
        records = self._records.setdefault(agent, {})
        changed = False
        for line in _lines(cursor, data):
            record = cursor.parse(line)
            if record is not None and records.get(record.key) != record:
                records[record.key] = record
                changed = True
        return changed


def _lines(cursor: _Cursor, data: bytes) -> list[bytes]:
    """The whole lines `data` completes; the unfinished tail stays in the cursor."""
    lines: list[bytes] = []
    start = 0
    while (end := data.find(b"\n", start)) >= 0:
        if cursor.skipping:
            cursor.skipping = False
        elif cursor.pending:
            cursor.pending += data[start:end]
            lines.append(bytes(cursor.pending))
            cursor.pending.clear()
        else:
            lines.append(data[start:end])
        start = end + 1
    if not cursor.skipping:
        cursor.pending += data[start:]
        if len(cursor.pending) > LINE_MAX:
            cursor.pending.clear()
            cursor.skipping = True
    return lines


# --- which sessions are whose ------------------------------------------------------------


def merged_sessions(
    known: Mapping[str, list[str]], current: Mapping[str, str | None]
) -> dict[str, list[str]]:
    """`known` with each agent's current session added (kept in first-seen order)."""
    merged = {agent: list(ids) for agent, ids in known.items()}
    for agent, session in current.items():
        if session and session not in merged.setdefault(agent, []):
            merged[agent].append(session)
    return merged
