"""Issue 24's smaller holes, each tried against a real `hive-office serve` the way an agent
would from its own desk (its HIVE_AGENT_ID, its worktree, its shell's file system calls),
each refusal beside the call that still goes through:

- a lease on the whole tree (`/`, `*`, `**`, `.`, `*/*`) is refused; a file lease holds;
- a symbolic link planted as the hive's `log/` folder is never rotated into (nothing is
  written where it points), said once in health and the office's log; once it is moved
  aside the log rotates into a real folder; a link planted as run/office.log is moved
  aside at start, never written through;
- `hive read`, `hive inbox` and `hive log` show C1 controls and bidi overrides as escapes,
  and so does `hive-office diff` on a terminal (piped, the patch stays exact);
- office.toml with a 2 MB agent name or an `env` of HIVE_SECRET or LD_PRELOAD is refused
  by doctor and serve, naming the agent and the key; an ordinary env key serves;
- a client frame nested deeper than the stack is a bad frame: that peer is dropped without
  a traceback, and a good client attaches to the same office.
"""

from __future__ import annotations

import json
import os
import pty
import socket
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec
import pytest

from hive_core.clients.protocol import Detach, Hello, Welcome, encode, office_reader
from hive_core.fsio import append_line
from hive_core.health import read_health
from hive_core.ids import utc_now_iso
from hive_core.logfile import LOG_ROTATE_BYTES
from hive_core.logfile import log_problem as rotation_problem
from hive_core.office import daemon
from hive_core.paths import HivePaths
from hive_core.schema import LogEvent, Message
from hive_core.team.leases import whole
from tests.e2e.test_worktree import Office as WorktreeOffice
from tests.e2e.test_worktree import placed
from tests.support import short_dir, wait_for
from tests.tmux_support import write_office

BIN = Path(sys.executable).parent


class Done(NamedTuple):
    rc: int
    out: str
    err: str


def run(home: Path, *args: str, agent: str | None = None, cwd: Path | None = None) -> Done:
    """A command as a desk runs it: the office's home and, for an agent, its id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env["HIVE_HOME"] = str(home)
    if agent:
        env["HIVE_AGENT_ID"] = agent
    done = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        env=env,
        cwd=cwd or home,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


class RouteRoster(NamedTuple):
    root: Path
    paths: HivePaths
    repo: Path
    tree: Path  # pam's worktree
    proc: subprocess.Popen[bytes]
    serve_log: Path

    @property
    def home(self) -> Path:
        return self.paths.home

    def run(self, *args: str, agent: str | None = None, cwd: Path | None = None) -> Done:
        return run(self.home, *args, agent=agent, cwd=cwd)


def with_env(toml: str, agent: str, env: str) -> str:
    """office.toml with `env` (an inline table) added to `agent`'s entry."""
    marker = f'id = "{agent}"\n'
    assert marker in toml
    return toml.replace(marker, f"{marker}env = {env}\n", 1)


@pytest.fixture(scope="module")
def floor() -> Iterator[RouteRoster]:
    with short_dir() as root:
        root = Path(os.path.realpath(root))
        repo = root / "repo"
        for name in ("src/a.py", "src/b.py", "docs/x.md"):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text("x\n")
        git("init", "-q", "-b", "main", cwd=repo)
        git("add", ".", cwd=repo)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=repo)
        tree = root / "trees" / "pam"
        git("worktree", "add", "-q", "-b", "hive/pam", str(tree), cwd=repo)
        home = root / "home"
        init = run(root, "hive-office", "init", "--home", str(home))
        assert init.rc == 0, init.err
        paths = HivePaths(home)
        # An ordinary env key is the allowed path of the env rule: this office serves.
        toml = paths.office_toml.read_text()
        paths.office_toml.write_text(with_env(toml, "jim", '{ EDITOR = "vi", LANG = "C.UTF-8" }'))
        serve_log = root / "serve.log"
        proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(home), "--no-agents"],
            env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"},
            stdout=serve_log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: paths.client_socket.exists(), "the office to serve")
        yield RouteRoster(root, paths, repo, tree, proc, serve_log)
        proc.terminate()
        proc.wait(timeout=60)


def leases_now(floor: RouteRoster) -> list[dict[str, object]]:
    listed = floor.run("hive", "lease", "list", "--json")
    assert listed.rc == 0, listed.err
    found: list[dict[str, object]] = json.loads(listed.out)["leases"]
    return found


# --- 1. a lease on the whole tree ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "is_whole"),
    [
        ("*", True),
        ("**", True),
        ("*/*", True),
        ("?*", True),
        ("[a-z]*", True),
        ("", True),
        ("src", False),
        ("src/*", False),
        ("*.py", False),
        ("**/test_x.py", False),
        ("[a]", False),
    ],
)
def test_a_pattern_is_whole_when_it_names_no_character_of_its_own(
    pattern: str, is_whole: bool
) -> None:
    assert whole(pattern) is is_whole


def test_a_lease_on_the_whole_tree_is_refused_and_a_file_lease_holds(floor: RouteRoster) -> None:
    for raw, cwd in (("/", floor.tree), ("*", floor.tree), ("**", floor.tree), (".", floor.tree),
                     ("*/*", floor.tree), (str(floor.tree), floor.root)):  # fmt: skip
        refused = floor.run("hive", "lease", raw, "--ttl", "8h", agent="pam", cwd=cwd)
        assert refused.rc != 0, (raw, refused.out)
        assert "lease the paths you will edit" in refused.err, (raw, refused.err)
        assert "Traceback" not in refused.err
    assert leases_now(floor) == []
    # What the agent will edit is leased, and holds against another desk.
    taken = floor.run("hive", "lease", "src/a.py", "--ttl", "8h", agent="pam", cwd=floor.tree)
    assert taken.rc == 0, taken.err
    other = floor.run("hive", "lease", "src/*.py", agent="jim", cwd=floor.repo)
    assert other.rc != 0 and "is leased by pam" in other.err
    # Only that file: the rest of the tree is still everyone's.
    assert floor.run("hive", "lease", "src/b.py", "docs", agent="jim", cwd=floor.repo).rc == 0
    assert sorted(str(lease["path"]) for lease in leases_now(floor)) == [
        "docs",
        "src/a.py",
        "src/b.py",
    ]
    assert floor.run("hive", "release", "src/a.py", agent="pam", cwd=floor.tree).rc == 0
    assert floor.run("hive", "release", "src/b.py", "docs", agent="jim", cwd=floor.repo).rc == 0


# --- 2. a symbolic link as the hive's log folder -------------------------------------------


def log_line(text: str) -> bytes:
    return msgspec.json.encode(LogEvent(ts=utc_now_iso(), kind="office", msg=text))


def grow_log(paths: HivePaths, tag: str) -> None:
    """The live log past the rotation size, in lines the office's readers accept."""
    line = log_line(f"{tag} " + "x" * 1000)
    while paths.log.stat().st_size < LOG_ROTATE_BYTES + 4096:
        append_line(paths.log, line)


def log_problem(paths: HivePaths) -> str | None:
    health = read_health(paths.health_file)
    found = [p.detail for p in (health.problems if health else []) if p.component == "log"]
    return found[0] if found else None


def commits(paths: HivePaths) -> int:
    return int(git("rev-list", "--count", "HEAD", cwd=paths.hive).strip())


def test_the_log_is_rotated_only_as_a_regular_file_into_a_real_folder() -> None:
    assert rotation_problem(stat.S_IFDIR, stat.S_IFREG) is None
    assert rotation_problem(None, None) is None  # both are made as they are needed
    assert "log/ folder is a symbolic link" in (rotation_problem(stat.S_IFLNK, stat.S_IFREG) or "")
    assert "log/ folder is not a folder" in (rotation_problem(stat.S_IFREG, stat.S_IFREG) or "")
    assert "log.jsonl is a symbolic link" in (rotation_problem(stat.S_IFDIR, stat.S_IFLNK) or "")
    assert "log.jsonl is not a regular file" in (rotation_problem(None, stat.S_IFIFO) or "")


def test_a_linked_log_folder_is_never_rotated_into_and_a_real_one_is(floor: RouteRoster) -> None:
    paths = floor.paths
    outside = floor.root / "outside"
    outside.mkdir()
    # A file the link's target already held: `hive log` must not show it as the hive's.
    planted = log_line("planted-outside") + b"\n"
    (outside / "0001.jsonl").write_bytes(planted)
    before = sorted(os.listdir(outside))
    # The agent's shell: the office's folder aside (if there is one yet), a link in its place.
    if os.path.lexists(paths.log_segments):
        os.rename(paths.log_segments, paths.hive / "log.before")
    os.symlink(outside, paths.log_segments)
    grow_log(paths, "linked")
    problem = wait_for(lambda: log_problem(paths), "health to report the linked log folder")
    assert "log/ folder is a symbolic link" in problem and "move hive/log aside" in problem
    # More commits come and go; nothing lands outside, and the office's log says it once.
    seen = commits(paths)
    append_line(paths.log, log_line("one more"))
    wait_for(lambda: commits(paths) > seen, "another commit")
    assert sorted(os.listdir(outside)) == before
    assert (outside / "0001.jsonl").read_bytes() == planted
    assert os.path.islink(paths.log_segments)
    assert paths.log.stat().st_size > LOG_ROTATE_BYTES  # kept, not moved anywhere
    assert floor.serve_log.read_text(errors="replace").count("log not rotated:") == 1
    shown = floor.run("hive", "log", "-n", "0")
    assert shown.rc == 0, shown.err
    assert "planted-outside" not in shown.out and "one more" in shown.out
    # The link moved aside: the next commit rotates into a real folder, and health clears.
    os.rename(paths.log_segments, paths.hive / "log.link-aside")
    append_line(paths.log, log_line("after the fix"))
    wait_for(lambda: log_problem(paths) is None, "the log problem to clear")
    segment = wait_for(
        lambda: next(iter(sorted(paths.log_segments.glob("*.jsonl"))), None), "a segment"
    )
    assert paths.log_segments.is_dir() and not paths.log_segments.is_symlink()
    assert b"after the fix" in segment.read_bytes()
    assert sorted(os.listdir(outside)) == before


# --- 3. C1 controls and bidi overrides in what `hive` prints --------------------------------


HOSTILE_SUBJECT = "invoice \u202egpj.exe"
HOSTILE_BODY = "first\n\x9b2J\u2066hidden\u2069\x85\x1b]52;c;cm0gLXJm\x07 end"


def test_hive_read_inbox_and_log_show_c1_and_bidi_as_escapes(floor: RouteRoster) -> None:
    paths = floor.paths
    # Any process of this user can drop a file in an inbox: the reader is the last guard.
    msg = Message(
        id="20261205T120000000000Z-sb",
        conversation="20261205T120000000000Z-sb",
        in_reply_to=None,
        sender="pam",
        to="jim",
        act="inform",
        subject=HOSTILE_SUBJECT,
        body=HOSTILE_BODY,
        created_at="2026-12-05T12:00:00Z",
    )
    inbox = paths.mailbox("jim").inbox
    (inbox / f"{msg.id}.json").write_bytes(msgspec.json.encode(msg))
    read = floor.run("hive", "read", msg.id, agent="jim")
    assert read.rc == 0, read.err
    assert "invoice \\u202egpj.exe" in read.out
    assert "first\n\\x9b2J\\u2066hidden\\u2069\\x85\\x1b]52;c;cm0gLXJm\\x07 end" in read.out
    listed = floor.run("hive", "inbox", agent="jim")
    assert listed.rc == 0 and "invoice \\u202egpj.exe" in listed.out
    for out in (read.out, listed.out):
        assert not any(0x80 <= ord(c) <= 0x9F or c in "\u202e\u2066\u2069\x1b\x07" for c in out)
    assert floor.run("hive", "done", msg.id, agent="jim").rc == 0
    # Sent through the office instead, the router drops them before the inbox; the log
    # line of it shows the rest, and ordinary text (right-to-left too) comes through.
    rtl = "\u05e9\u05dc\u05d5\u05dd \u200f(1)"
    sent = floor.run(
        "hive", "send", "--to", "jim", "--subject", f"{HOSTILE_SUBJECT} {rtl}",
        "--body", HOSTILE_BODY, agent="pam",
    )  # fmt: skip
    assert sent.rc == 0, sent.err
    box = paths.mailbox("jim").inbox
    routed = wait_for(lambda: next(iter(box.glob("*.json")), None), "the routed message")
    got = msgspec.json.decode(routed.read_bytes(), type=Message)
    assert got.subject == f"invoice gpj.exe {rtl}"
    read = floor.run("hive", "read", got.id, agent="jim")
    assert read.rc == 0 and f"subject:     invoice gpj.exe {rtl}" in read.out
    assert "first\n2Jhidden]52;c;cm0gLXJm end" in read.out
    logged = floor.run("hive", "log", "-n", "50")
    # (A one-line view spaces out every invisible format character, the marks too.)
    assert logged.rc == 0 and "'invoice gpj.exe \u05e9\u05dc\u05d5\u05dd (1)'" in logged.out
    assert floor.run("hive", "done", got.id, agent="jim").rc == 0


# --- 4. office.toml: a huge name, an env the office owns or that loads code -----------------


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda t: t.replace('name = "Jim"', f'name = "{"J" * 2_000_000}"', 1),
         ["agent jim's name is 2000000 characters", "at most 64"]),
        (lambda t: with_env(t, "jim", '{ HIVE_SECRET = "forged" }'),
         ["agent jim's env sets HIVE_SECRET", "belongs to the office", "remove HIVE_SECRET"]),
        (lambda t: with_env(t, "jim", '{ HIVE_HOME = "/tmp/elsewhere" }'),
         ["agent jim's env sets HIVE_HOME", "remove HIVE_HOME"]),
        (lambda t: with_env(t, "jim", '{ LD_PRELOAD = "/tmp/evil.so" }'),
         ["agent jim's env sets LD_PRELOAD", "load code", "remove it from that agent's env"]),
        (lambda t: with_env(t, "jim", '{ LD_AUDIT = "/tmp/evil.so" }'),
         ["agent jim's env sets LD_AUDIT"]),
        (lambda t: with_env(t, "jim", '{ "A=B" = "x" }'),
         ["agent jim's env key 'A=B' is not a variable name"]),
    ],
)  # fmt: skip
def test_doctor_and_serve_refuse_an_office_toml_with_a_bad_agent_entry(
    edit: object, words: list[str]
) -> None:
    with short_dir() as root:
        home = Path(root) / "home"
        assert run(Path(root), "hive-office", "init", "--home", str(home)).rc == 0
        toml = HivePaths(home).office_toml
        assert callable(edit)
        toml.write_text(edit(toml.read_text()))
        doctor = run(Path(root), "hive-office", "doctor", "--home", str(home))
        serve = run(Path(root), "hive-office", "serve", "--home", str(home), "--no-agents")
        for done, said in ((doctor, doctor.out + doctor.err), (serve, serve.err)):
            assert done.rc != 0
            assert "office.toml, line" in said and "Traceback" not in said
            for word in words:
                assert word in said, (word, said[-600:])
            assert "J" * 1000 not in said  # the name is counted, not echoed
        assert not HivePaths(home).client_socket.exists()


def test_an_ordinary_agent_env_passes_doctor(floor: RouteRoster) -> None:
    # The module's office serves with jim's EDITOR and LANG (the fixture); doctor agrees.
    doctor = floor.run("hive-office", "doctor", "--home", str(floor.home))
    assert "office.toml is invalid" not in doctor.out, doctor.out
    assert floor.proc.poll() is None


# --- 5. a client frame nested deeper than the stack ----------------------------------------


def frames(sock: socket.socket) -> Iterator[object]:
    reader = office_reader()
    while data := sock.recv(65536):
        yield from reader.feed(data)


def test_a_deeply_nested_frame_drops_only_that_client(floor: RouteRoster) -> None:
    paths = floor.paths
    # A msgpack map with an unknown field holding arrays nested 200,000 deep.
    body = b"\x82\xa1t\xa5hello\xa4junk" + b"\x91" * 200_000 + b"\xc0"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bad:
        bad.settimeout(60)
        bad.connect(str(paths.client_socket))
        bad.sendall(struct.pack(">I", len(body)) + body)
        assert bad.recv(65536) == b""  # the office closed it
    said = wait_for(
        lambda: "; dropped" in (text := floor.serve_log.read_text(errors="replace")) and text,
        "the office to log the dropped client",
    )
    assert "Traceback" not in said and "RecursionError" not in said
    assert "sent what is not the client protocol (a frame nested too deeply to decode)" in said
    # A good client attaches to the same office and is welcomed.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as good:
        good.settimeout(60)
        good.connect(str(paths.client_socket))
        good.sendall(encode(Hello(version=1, pid=os.getpid(), term_cols=120, term_rows=40)))
        first = next(frames(good))
        assert isinstance(first, Welcome) and "jim" in first.roster
        good.sendall(encode(Detach()))
    assert floor.proc.poll() is None


def test_a_linked_office_log_is_moved_aside_and_never_written_through() -> None:
    with short_dir() as root:
        paths = HivePaths(write_office(root))
        outside = root / "elsewhere.txt"
        outside.write_text("the person's file\n")
        paths.run.mkdir(mode=0o700, exist_ok=True)
        os.symlink(outside, paths.office_log)
        started = daemon.start(paths)
        try:
            assert outside.read_text() == "the person's file\n"
            assert not paths.office_log.is_symlink() and paths.office_log.is_file()
            aside = paths.office_log.with_name(paths.office_log.name + ".1")
            assert aside.is_symlink() and os.readlink(aside) == str(outside)
            # The office's own output goes to its own file: a normal start, a normal stop.
            wait_for(lambda: paths.office_log.stat().st_size > 0, "the office's own log")
        finally:
            stopped = run(root, "hive-office", "stop", "--home", str(paths.home))
        assert f"(pid {started.pid}) stopped" in stopped.out, stopped.err
        assert outside.read_text() == "the person's file\n"


def on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What `argv` prints with a terminal (a pty) as its stdout."""
    main, sub = pty.openpty()
    try:
        proc = subprocess.Popen(argv, env=env, stdout=sub, stderr=subprocess.PIPE)
        os.close(sub)
        out = bytearray()
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the pty's other side closed
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        os.close(main)
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_hive_office_diff_shows_an_agents_bidi_override_on_a_terminal_and_pipes_it_exact() -> None:
    with short_dir() as root:
        office = WorktreeOffice(root)
        jim = placed(office, "jim")
        line = 'access = "user\u202e \u2066// admin\u2069\u2066"  # \x1b[8mhidden\x1b[0m'
        (jim / "auth.py").write_text(line + "\n")
        argv = [str(BIN / "hive-office"), "diff", "jim", "--home", str(office.paths.home)]
        shown_out = on_a_terminal(argv, office.env)
        assert (
            '+access = "user\\u202e \\u2066// admin\\u2069\\u2066"  # \\x1b[8mhidden\\x1b[0m'
        ) in shown_out
        assert not any(c in shown_out for c in "\u202e\u2066\u2069\x1b")
        # Piped, the patch is byte for byte what git apply needs.
        piped = office.run("hive-office", "diff", "jim")
        assert piped.returncode == 0 and f"+{line}\n" in piped.stdout
