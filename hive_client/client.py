"""`hive VERB` while an office runs: the office runs the verb, this process shows it.

    -> control socket: {"cmd": "hive", "argv": [...], "cwd": ..., "tty": [...],
                        "agent": $HIVE_AGENT_ID, "secret": $HIVE_SECRET}\\n
    <- {"ok": true, ...}\\n        or {"ok": false, "error": ...}\\n (refused: exit 1)
    <- frames: STDOUT, STDERR, WANT (the verb reads its stdin), READ (the verb reads a
       file the command line names), then EXIT, the last
    -> frames: STDIN, once WANT came (length 0: its end); for each READ, FILE frames
       (length 0: the file's end) or one FILE_ERROR

A frame is a type byte, a 4-byte big-endian length and that many bytes (at most
FRAME_MAX); EXIT carries the verb's exit code (4 bytes, signed). This module is the one
place for the wire: the office's side (hive_core/office/verbs.py, hive_core/remote/relay.py)
uses these names.

Who is calling is this process: the office attributes the connection from the kernel's
word (SO_PEERCRED and the process's ancestry, hive_core/control.py) and checks what the
environment claims (HIVE_AGENT_ID, HIVE_SECRET) against it as for every verb; the verb
then runs in the office as that proven caller, never as what this end says. A file the
command line names is read here, by this process (READ): from its cwd, with only what
this process may read (a contained desk's, hive_core/desks/contain.py), never what the
office may.

Where it runs (`runs_in_office`): every verb, but those in LOCAL and a few command
lines, which this process runs itself (hive_core/cli/hive.py goes on with the full
`hive`), as it does when no office runs. An office that is starting (its lock held,
its socket not answering yet) is waited for, up to WAIT_S, with one line saying so.
On a remote desk's host (HIVE_REMOTE=1, HIVE_CONTROL the desk's forwarded socket) every
verb goes to the office: that host has no office files.

This runs on every `hive` call an agent makes, and its whole cost is the interpreter's
start-up plus what it imports: only modules already loaded at start-up, `_socket`, and
`select` or `json` on the paths that need them (a verb reading stdin; a refusal).
"""

import _socket
import os
import time

STDIN, STDOUT, STDERR, EXIT, WANT, READ, FILE, FILE_ERROR = range(8)
HEADER_SIZE = 5
# The most data one frame carries: a pipe's worth, so a frame is one read on each side.
FRAME_MAX = 64 * 1024
# How long a caller waits for the office's answer (here: the reply line) before it
# refuses. Generous: a busy office (a routing burst, a large commit) answers well within.
ANSWER_TIMEOUT_S = 10.0
# How long a call waits for an office that is starting or restarting.
WAIT_S = 15.0
RETRY_S = 0.05
# The reply line's bound: a refusal is one sentence.
REPLY_MAX = 64 * 1024
# `hive`'s exit code for a refusal (cli/common.py REFUSED).
REFUSED = 1
NOT_ANSWERING = "the office is not answering; try again."
WAITING = f"hive: waiting for the office to answer (up to {WAIT_S:.0f} s)...\n"

# Verbs this process runs itself while an office runs, and why (on a remote desk's host
# the office runs them in a process of their own, hive_core/remote/relay.py).
LOCAL = {
    "mcp": "a stdio server that lives as long as the agent's CLI",
    "memory": "search without an office loads the model; tidy asks the agent's CLI and "
    "reindex reads the whole hive, for as long as they take; edit opens an editor",
    "ci-logs": "it runs `gh` over the network for as long as the download takes",
}
# ... but for these memory verbs, which change one entry and end at once (`edit` only
# with its text on the command line or stdin: without --text it may open an editor).
MEMORY_IN_OFFICE = frozenset({"note", "forget", "promote"})
# Words after the verb that keep it here: help is sized to this terminal, --home after
# the verb names an office this process has not looked up, and `log --follow` lives
# until Ctrl+C.
_LOCAL_WORDS = frozenset({"-h", "--help", "--version", "--home"})
# Set in a contained desk's environment (hive_core/desks/supervisor.py); a desk that
# unsets it runs LOCAL verbs in its own walls, where their writes fail.
CONTAINED_ENV = "HIVE_CONTAINED"
_DEFAULT_HOME = "~/.hive-office"  # hive_core.paths.DEFAULT_HOME (tests pin the two together)
_CONTROL = ("run", "control.sock")  # hive_core.paths.HivePaths.control_socket, likewise

# JSON string escapes (RFC 8259): control characters, quote, backslash. The json module
# costs a seventh of an interpreter's start; a request needs only strings escaped.
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"


def frame(kind: int, data: bytes = b"") -> bytes:
    return bytes((kind,)) + len(data).to_bytes(4, "big") + data


def header(data: bytes | bytearray) -> tuple[int, int]:
    """A frame header's (kind, length)."""
    return data[0], int.from_bytes(data[1:5], "big")


def exit_frame(code: int) -> bytes:
    return frame(EXIT, code.to_bytes(4, "big", signed=True))


def split_home(argv: list[str]) -> tuple[str | None, list[str]]:
    """`--home DIR` given before the verb, and the words from the verb on."""
    home = None
    while argv:
        if argv[0].startswith("--home="):
            home, argv = argv[0].removeprefix("--home="), argv[1:]
        elif argv[0] == "--home" and len(argv) > 1:
            home, argv = argv[1], argv[2:]
        else:
            break
    return home, argv


def runs_in_office(words: list[str], *, contained: bool = False) -> bool:
    """Whether the office runs `hive WORDS` (words from the verb on) while it runs;
    False: the calling process runs it (LOCAL, and the command lines said there). A
    contained desk's LOCAL verbs go to the office too: its process cannot write what they
    write (memory.db, the CI-log cache), so the office runs them as the desk, in a
    process of their own (office/verbs.py)."""
    if not words or words[0].startswith("-"):
        return False
    if words[0] in LOCAL and not contained and not _memory_in_office(words):
        return False
    for word in words[1:]:
        if word == "--":
            break
        if word in _LOCAL_WORDS or word.startswith("--home="):
            return False
        if words[0] == "log" and (
            word == "--follow" or (word[:1] == "-" and word[1:2] not in ("-", "") and "f" in word)
        ):
            return False
    return True


def home_path(home: str | None) -> str:
    """The office home: --home, else HIVE_HOME, else the default (paths.resolve_home)."""
    raw = home or os.environ.get("HIVE_HOME") or _DEFAULT_HOME
    return os.path.abspath(os.path.expanduser(raw))


def control_socket(home: str) -> str:
    return os.path.join(home, *_CONTROL)


def office_running(home: str) -> bool | None:
    """Whether an office holds `home` (its flock on the home folder, as the kernel lists
    it in /proc/locks); None when that cannot be told."""
    try:
        st = os.stat(home)
        with open("/proc/locks", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}".encode()
    # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
    return any(
        len(fields) >= 6 and fields[1] == b"FLOCK" and fields[5] == inode
        for fields in (line.split() for line in lines)
    )


def run(argv: list[str]) -> int | None:
    """`hive ARGV` run by the office: its exit code. None: run it in this process (no
    office runs, or the verb stays here)."""
    remote = os.environ.get("HIVE_CONTROL") if os.environ.get("HIVE_REMOTE") == "1" else None
    if remote:
        # The remote desk's words go as they are: the office checks a --home itself.
        return _call(remote, argv, None)
    home, words = split_home(argv)
    if not runs_in_office(words, contained=os.environ.get(CONTAINED_ENV) == "1"):
        return None
    home = home_path(home)
    return _call(control_socket(home), words, home)


def _memory_in_office(words: list[str]) -> bool:
    if words[0] != "memory" or len(words) < 2:
        return False
    options = words[: words.index("--")] if "--" in words else words
    return words[1] in MEMORY_IN_OFFICE or (
        words[1] == "edit" and any(w == "--text" or w.startswith("--text=") for w in options)
    )


def _request(argv: list[str]) -> bytes | None:
    """The request line of this process's call, None if a word cannot be sent as text
    (bytes that are not UTF-8, which the full `hive` reports)."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    return request_line(
        argv,
        cwd=cwd,
        tty=[_isatty(fd) for fd in (0, 1, 2)],
        secret=os.environ.get("HIVE_SECRET", ""),
        agent=os.environ.get("HIVE_AGENT_ID"),
    )


def request_line(
    argv: list[str], *, cwd: str, tty: list[bool], secret: str, agent: str | None
) -> bytes | None:
    """The `hive` request (the module's docstring), None if a word is not UTF-8 text."""
    fields = [
        '"cmd":"hive"',
        '"argv":[' + ",".join(_quoted(word) for word in argv) + "]",
        '"cwd":' + _quoted(cwd),
        '"tty":[' + ",".join("true" if t else "false" for t in tty) + "]",
        '"secret":' + _quoted(secret),
    ]
    if agent is not None:
        fields.append('"agent":' + _quoted(agent))
    try:
        return ("{" + ",".join(fields) + "}\n").encode()
    except UnicodeEncodeError:
        return None


def _quoted(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


class _Gone(Exception):
    """The office closed the connection before it took the verb (it is stopping)."""


def _call(path: str, argv: list[str], home: str | None) -> int | None:
    """Send the verb to the office on `path` and show it to its end. `home`: the office
    home when it is this machine's (None: a remote desk's socket)."""
    request = _request(argv)
    if request is None:
        return None if home is not None else _fail("the command line is not UTF-8 text.")
    waiting_since = None
    while True:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(ANSWER_TIMEOUT_S)
            sock.connect(path)
            sock.sendall(request)
            reply = _reply_line(sock)
        except (
            FileNotFoundError,
            ConnectionRefusedError,
            ConnectionResetError,
            BrokenPipeError,
            BlockingIOError,
            _Gone,
        ):
            # No office, one starting or stopping, or its queue of connections full (a
            # flood: a Unix socket's connect with a timeout fails at once, EAGAIN): the
            # verb has not run.
            sock.close()
            if home is not None and office_running(home) is not True:
                # No office holds the home (or that cannot be told): the full `hive`
                # decides, as with no office at all.
                return None
        except TimeoutError:
            return _fail(NOT_ANSWERING)
        except OSError as e:
            sock.close()
            if home is not None:
                return None  # a socket path this process cannot use: the full `hive` says why
            return _fail(_unreachable(path, e))
        else:
            return _answered(sock, reply)
        now = time.monotonic()
        if waiting_since is None:
            waiting_since = now
            os.write(2, WAITING.encode())
        elif now - waiting_since > WAIT_S:
            return _fail(NOT_ANSWERING if home is not None else _unreachable(path, None))
        time.sleep(RETRY_S)


def _unreachable(path: str, error: OSError | None) -> str:
    why = f": {error}" if error is not None else ""
    return (
        f"the office does not answer on HIVE_CONTROL ({path}{why}); the desk's ssh link "
        "may be down, try again in a moment."
    )


def _reply_line(sock: _socket.socket) -> bytes:
    """The office's reply line, read byte-exactly: what follows it is the verb's frames."""
    data = bytearray()
    while not data.endswith(b"\n"):
        if len(data) > REPLY_MAX:
            raise _Gone
        chunk = sock.recv(1)
        if not chunk:
            raise _Gone
        data += chunk
    return bytes(data)


def _answered(sock: _socket.socket, reply: bytes) -> int:
    # msgspec writes a ControlReply's fields in order, `ok` first: an accepted verb is
    # told without the json module (tests pin the office's reply to this prefix).
    if not reply.startswith(b'{"ok":true'):
        import json

        try:
            error = json.loads(reply).get("error")
        except (ValueError, AttributeError):
            error = None
        sock.close()
        return _fail(
            error if isinstance(error, str) and error else "the office refused the command."
        )
    sock.settimeout(None)
    try:
        return _frames(sock)
    except OSError:
        return _fail(
            "the office closed the connection before the command ended; check with "
            "`hive log` whether it was done before running it again."
        )
    finally:
        sock.close()


def _frames(sock: _socket.socket) -> int:
    """Write the verb's output where it belongs (and send stdin once asked) until its
    exit code arrives."""
    buf = bytearray()
    stdin_open = False
    while True:
        while len(buf) >= HEADER_SIZE:
            kind, size = header(buf)
            if size > FRAME_MAX:
                raise OSError("a frame is too long")
            if len(buf) < HEADER_SIZE + size:
                break
            data = bytes(buf[HEADER_SIZE : HEADER_SIZE + size])
            del buf[: HEADER_SIZE + size]
            if kind == EXIT and size == 4:
                return int.from_bytes(data, "big", signed=True)
            if kind in (STDOUT, STDERR):
                _write(kind, data)
            elif kind == WANT:
                stdin_open = True
            elif kind == READ:
                _send_file(sock, data)
        if stdin_open:
            import select  # a C extension, and only a verb reading stdin needs it

            ready, _, _ = select.select([sock.fileno(), 0], [], [])
            if 0 in ready:
                stdin_open = _send_stdin(sock)
            if sock.fileno() not in ready:
                continue
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise OSError("the connection closed")
        buf += chunk


def _send_stdin(sock: _socket.socket) -> bool:
    """One read of our stdin to the office; False once it ended (then sent as length 0)."""
    try:
        data = os.read(0, FRAME_MAX)
    except OSError:
        data = b""  # no stdin at all (a closed fd): the verb sees an empty one
    try:
        sock.sendall(frame(STDIN, data))
    except (BrokenPipeError, ConnectionResetError):
        # The verb ended without reading the rest (a body over its limit) and the office
        # closed its end: what it said, and its exit code, are still to be read.
        return False
    return bool(data)


def read_request(path: str, limit: int | None) -> bytes:
    """A READ frame's data: the most bytes wanted (-1: all) and the path."""
    return f"{-1 if limit is None else limit}\n{path}".encode("utf-8", "surrogateescape")


def _send_file(sock: _socket.socket, request: bytes) -> None:
    """The file a READ names (at most its limit), in FILE frames, or why not."""
    most, _, raw = request.partition(b"\n")
    left = int(most)
    try:
        fd = os.open(os.fsdecode(raw), os.O_RDONLY)
    except OSError as e:
        sock.sendall(frame(FILE_ERROR, f"{e.errno}\n{e.strerror}".encode()))
        return
    try:
        while left:
            data = os.read(fd, FRAME_MAX if left < 0 else min(left, FRAME_MAX))
            if not data:
                break
            left -= len(data) if left > 0 else 0
            sock.sendall(frame(FILE, data))
    except OSError as e:
        sock.sendall(frame(FILE_ERROR, f"{e.errno}\n{e.strerror}".encode()))
        return
    finally:
        os.close(fd)
    sock.sendall(frame(FILE))


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        # The reader went away (`hive log | head`): nothing more to show, as a shell's
        # SIGPIPE would end us.
        os._exit(REFUSED)


def _fail(message: str) -> int:
    os.write(2, f"hive: {message}\n".encode(errors="replace"))
    return REFUSED
