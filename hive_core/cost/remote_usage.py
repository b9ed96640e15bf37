"""A remote desk's usage records, read on its host over ssh (its CLI writes them there).

The office keeps the cursors (usage.UsageBook) and asks the host only for the bytes after
them: one ssh call per remote agent per pass, riding the desk's own connection while it
is up (ssh.ssh_argv, master=False). On the host a short Python program (the remote
venv's, stdlib only, so it does not depend on the hive-office version installed there)
finds the files the way agents/usage.py does locally, with the host's login environment and the
roster's `env` over it (what the desk's CLI sees), and prints each file's identity, size
and the bytes from the office's offset, base64-encoded, between two marker lines; a
reply without its end marker is refused whole, so a dropped link never moves a cursor.
The lines go to the provider's own parser (usage.claude_parser, codex_parser), so the
sums are those a local read would give.

Everything here but `RemoteUsage.read` and `run_probe` is pure.
"""

from __future__ import annotations

import glob
import logging
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import msgspec

from hive_core.agents.usage import (
    PASS_READ_MAX,
    LineParser,
    UsageBook,
    claude_parser,
    codex_parser,
)
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.remote.ssh import remote_path_word, ssh_argv
from hive_core.schema import AgentSpec

log = logging.getLogger(__name__)

# One reply carries at most this much file data (base64 adds a third): a long transcript
# on a slow link is caught up over passes instead of one reply outlasting the timeout.
# Each file is also capped at usage.PASS_READ_MAX, as locally.
REPLY_DATA_MAX = 16 * 1024 * 1024
# A probe that has not answered by then is killed and its host skipped this pass; ssh's
# ConnectTimeout (10 s) bounds the connect, this the rest.
PROBE_TIMEOUT_S = 30.0
# Probes of different agents run side by side, so one hung host delays a pass by at most
# one timeout whatever the number of its desks.
PROBE_WORKERS = 8

BEGIN = b"hive-usage 1"
END = b"hive-usage end"

# Runs on the host under `python -I -c`: the query arrives on stdin (no argv limit, and
# session ids never pass through a shell). Must stay stdlib-only and Python 3.8-proof.
PROBE = r"""
import base64, glob, json, os, stat, sys
q = json.load(sys.stdin)
env = dict(os.environ)
env.update(q["env"])
root = (q["var"] and env.get(q["var"])) or q["root"]
if root == "~" or root.startswith("~/"):
    root = (env.get("HOME") or os.path.expanduser("~")) + root[1:]
budget = q["reply_max"]
out = sys.stdout.buffer
out.write(b"hive-usage 1\n")
seen = set()
for pattern in q["globs"]:
    for path in sorted(glob.glob(os.path.join(glob.escape(root), pattern), recursive=True)):
        if path in seen:
            continue
        seen.add(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            dev, ino, offset = q["known"].get(path, (None, None, 0))
            if (dev, ino) != (st.st_dev, st.st_ino) or st.st_size < offset:
                offset = 0
            n = max(0, min(st.st_size - offset, q["file_max"], budget))
            data = os.pread(fd, n, offset) if n else b""
        except OSError:
            continue
        finally:
            os.close(fd)
        budget -= len(data)
        line = {"path": path, "dev": st.st_dev, "ino": st.st_ino, "size": st.st_size,
                "offset": offset, "data": base64.b64encode(data).decode()}
        out.write(json.dumps(line).encode() + b"\n")
out.write(b"hive-usage end\n")
"""


class Query(msgspec.Struct, kw_only=True):
    """What the probe reads: the files `globs` match under a root (the variable `var` of
    the host's environment with `env` over it, else `root`; `~` is that HOME), from
    `known` offsets (path -> [device, inode, offset]) on."""

    var: str | None
    root: str
    env: dict[str, str]
    globs: list[str]
    known: dict[str, tuple[int, int, int]] = {}
    file_max: int = PASS_READ_MAX
    reply_max: int = REPLY_DATA_MAX


class Chunk(msgspec.Struct, kw_only=True):
    """One file in a reply: its identity and size there, and the bytes from `offset`."""

    path: str
    dev: int
    ino: int
    size: int
    offset: int
    data: bytes  # base64 on the wire; msgspec decodes it


@dataclass(frozen=True)
class Where:
    """Where a provider's records are on a host, and the parser for each file."""

    query: Query
    parser: Callable[[Path], LineParser]


def where_on_host(spec: AgentSpec, paths: HivePaths, sessions: Sequence[str]) -> Where | None:
    """Where `spec`'s CLI writes its usage on its host; None for a provider whose records
    the office does not read (shell, gemini) or an agent with no session yet (it has
    written nothing, and asking would cost a login every pass)."""
    if not sessions:
        return None
    if spec.provider == "claude":
        # As claude.py locally: CLAUDE_CONFIG_DIR, else ~/.claude; transcripts by session
        # id in any project folder, with their subagents' (usage.claude_files).
        env = {k: v for k, v in spec.env.items() if k in ("CLAUDE_CONFIG_DIR", "HOME")}
        globs: list[str] = []
        for session in sessions:
            name = glob.escape(session)
            globs += [f"projects/*/{name}.jsonl", f"projects/*/{name}/subagents/*.jsonl"]
        query = Query(var="CLAUDE_CONFIG_DIR", root="~/.claude", env=env, globs=globs)
        return Where(query, claude_parser)
    if spec.provider == "codex":
        # The launch ships the agent's CODEX_HOME (under the office home) into the desk's
        # folder there, at the same place under <rdir>/files (plan.ship_plan).
        local = paths.provider_home("codex", spec.id).relative_to(paths.home)
        rdir = plan.rdir_relative(plan.office_key(paths.home), spec.id)
        query = Query(
            var=None,
            root=f"~/{rdir}/files/{local.as_posix()}",
            env={},
            globs=["sessions/**/rollout-*.jsonl"],
        )
        return Where(query, codex_parser)
    return None


def probe_command(remote_venv: str) -> str:
    """The string the host's login shell runs: the remote venv's Python on PROBE."""
    python = remote_path_word(plan.remote_venv_bin(remote_venv, "~") + "/python")
    return f"exec {python} -I -c {shlex.quote(PROBE)}"


def parse_reply(stdout: bytes) -> list[Chunk] | None:
    """The files in a probe's output (a login banner may come first); None if the
    reply is not whole (no end marker, a line that is not a file's)."""
    lines = stdout.split(b"\n")
    try:
        begin = lines.index(BEGIN)
        end = lines.index(END, begin)
    except ValueError:
        return None
    chunks = []
    for line in lines[begin + 1 : end]:
        try:
            chunks.append(msgspec.json.decode(line, type=Chunk))
        except msgspec.DecodeError:
            return None
    return chunks


def apply_reply(
    book: UsageBook, agent: str, chunks: Sequence[Chunk], parser: Callable[[Path], LineParser]
) -> bool:
    """Feed a reply's bytes to the book, as a local read would; True if a record changed."""
    changed = False
    for chunk in chunks:
        changed |= book.take(
            agent,
            Path(chunk.path),
            (chunk.dev, chunk.ino),
            chunk.size,
            chunk.offset,
            chunk.data,
            parser,
        )
    return changed


@dataclass(frozen=True)
class Ask:
    """One remote agent's probe in a pass: the ssh argv and the query for its stdin."""

    agent: str
    host: str
    # The host as ssh reaches it (its ssh_args too): what is down or back.
    destination: str
    argv: list[str]
    query: Query
    parser: Callable[[Path], LineParser]


@dataclass(frozen=True)
class Outcome:
    chunks: list[Chunk] | None
    reason: str  # why it failed, for the log; "" when it did not


def run_probe(ask: Ask, env: Mapping[str, str]) -> Outcome:
    try:
        done = subprocess.run(
            ask.argv,
            input=msgspec.json.encode(ask.query),
            capture_output=True,
            env=dict(env),
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Outcome(None, f"no answer within {PROBE_TIMEOUT_S:g} s")
    except OSError as exc:
        return Outcome(None, f"ssh cannot be run: {exc}")
    chunks = parse_reply(done.stdout) if done.returncode == 0 else None
    if chunks is None:
        fallback = f"the probe exited with code {done.returncode}"
        return Outcome(None, plan.link_reason(done.stderr.decode(errors="replace"), fallback))
    return Outcome(chunks, "")


# A desk whose records did not grow is asked less often: an idle office of many remote
# desks would otherwise start an ssh per desk every pass.
QUIET_FIRST_S = 5.0
QUIET_MAX_S = 60.0


def quiet_delay(quiet: int) -> float:
    """How long to leave a desk unasked after `quiet` probes in a row found nothing new
    (or failed): 0, then 5, 10, 20, 40, 60 s at most."""
    if quiet <= 0:
        return 0.0
    return min(QUIET_MAX_S, QUIET_FIRST_S * 2 ** min(quiet - 1, 8))


class RemoteUsage:
    """Reads the remote agents' records into the book, each pass. A host that cannot be
    reached, or a probe that fails, is skipped (its agents keep their sums); the log
    hears of it once, and once more when it answers again. A desk whose records do not
    grow is asked less often (quiet_delay), at once again when its sessions change, and
    every pass while `busy` says it works (the office sets it from the agents' states)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.failing: set[str] = set()
        self.clock = clock
        self.busy: Callable[[str], bool] = lambda agent: False
        self.quiet: dict[str, int] = {}
        self.next_at: dict[str, float] = {}
        self.sessions: dict[str, tuple[str, ...]] = {}

    def asks(
        self,
        book: UsageBook,
        specs: Sequence[AgentSpec],
        paths: HivePaths,
        sessions: Mapping[str, Sequence[str]],
        remote_venv: str,
    ) -> list[Ask]:
        command = probe_command(remote_venv)
        found = []
        for spec in specs:
            if not spec.host:
                continue
            where = where_on_host(spec, paths, sessions.get(spec.id, []))
            if where is None:
                continue
            current = tuple(sessions.get(spec.id, []))
            if self.sessions.get(spec.id) != current:
                self.sessions[spec.id] = current
                self.quiet.pop(spec.id, None)
                self.next_at.pop(spec.id, None)
            if self.clock() < self.next_at.get(spec.id, 0.0) and not self.busy(spec.id):
                continue
            query = msgspec.structs.replace(where.query, known=book.offsets(spec.id))
            argv = ssh_argv(spec, paths, command)
            destination = shlex.join([*spec.ssh_args, spec.host])
            found.append(Ask(spec.id, spec.host, destination, argv, query, where.parser))
        return found

    def heard(self, agent: str, grew: bool) -> None:
        """A probe of `agent` came back: with new bytes (ask every pass), or without
        (or failed: ask after quiet_delay)."""
        quiet = 0 if grew else self.quiet.get(agent, 0) + 1
        self.quiet[agent] = quiet
        self.next_at[agent] = self.clock() + quiet_delay(quiet)

    def read(self, book: UsageBook, asks: Sequence[Ask], env: Mapping[str, str]) -> bool:
        """Run the probes side by side and feed their replies to the book (on this
        thread: the book is not thread-safe); True if a record changed."""
        if not asks:
            return False
        # ssh runs with the office's environment (its agent socket), as a desk's own does.
        ssh_env = {k: v for k, v in env.items() if not k.startswith("HIVE_")}
        changed = False
        with ThreadPoolExecutor(min(len(asks), PROBE_WORKERS)) as pool:
            outcomes = pool.map(lambda ask: run_probe(ask, ssh_env), asks)
            for ask, outcome in zip(asks, outcomes, strict=True):
                self.heard(ask.agent, any(c.data for c in outcome.chunks or ()))
                if outcome.chunks is None:
                    if ask.destination not in self.failing:
                        self.failing.add(ask.destination)
                        log.warning(
                            "cannot read %s's usage on %s (%s); its cost stays as it was "
                            "until the host answers",
                            ask.agent,
                            ask.host,
                            outcome.reason,
                        )
                    continue
                if ask.destination in self.failing:
                    self.failing.discard(ask.destination)
                    log.info("reading usage on %s works again", ask.host)
                changed |= apply_reply(book, ask.agent, outcome.chunks, ask.parser)
        return changed
