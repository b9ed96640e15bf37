"""cth-hook: forward one hook event to the office and relay its answer.

    stdin (the agent CLI's hook event JSON)
      -> HIVE_SOCKET: {"agent": HIVE_AGENT_ID, "secret": HIVE_SECRET, "event": {...}}\\n
      <- {"exit": int, "stdout": str, "stderr": str}\\n
      -> our stdout, stderr and exit status

It fails open: office down, socket missing, a reply slower than the deadline
(HIVE_HOOK_TIMEOUT seconds, default 2), malformed or deeply nested input or reply, no
reply at all (the office refused the frame), all end in exit 0 with no output, so a hook
never hangs or breaks the agent.

Start-up time is the whole cost of a hook, so this imports only C-level modules besides
json: `_socket` instead of `socket` (which pulls in enum and selectors), and nothing from
hive_core. Run it as `<python> -S <path to this file>` to skip site start-up too.
"""

import _socket
import json
import os
import sys
import time

# The office's own bound on a frame (hive_core.schema.HOOK_FRAME_MAX; tests pin the two
# together). Measured on the frame as sent, envelope and escapes included, so anything
# the shim sends the office reads; a bigger one is dropped here (fail open), never cut.
# Write and Edit events carry whole files and PostToolUse tool output: it is generous.
MAX_FRAME_BYTES = 4 << 20
MAX_REPLY_BYTES = 4 << 20
DEFAULT_TIMEOUT = 2.0
MAX_TIMEOUT = 60.0


def _timeout() -> float:
    try:
        value = float(os.environ.get("HIVE_HOOK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT
    return min(value, MAX_TIMEOUT) if value > 0 else DEFAULT_TIMEOUT


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _read_stdin(deadline: float) -> bytes:
    import select  # a C extension: cheap, and only needed once stdin is read

    chunks: list[bytes] = []
    size = 0
    while True:
        # The CLI closes our stdin after writing the event; a caller that never does
        # must not hold us past the deadline.
        ready, _, _ = select.select([0], [], [], _remaining(deadline))
        if not ready:
            raise TimeoutError
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_FRAME_BYTES:
            raise ValueError("event too large")
        chunks.append(chunk)


def _exchange(path: str, frame: bytes, deadline: float) -> bytes:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(_remaining(deadline))
        sock.connect(path)
        sock.sendall(frame)
        reply = bytearray()
        while b"\n" not in reply:
            sock.settimeout(_remaining(deadline))
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("office closed without a reply")
            reply += chunk
            if len(reply) > MAX_REPLY_BYTES:
                raise ValueError("reply too large")
        return bytes(reply[: reply.index(b"\n")])
    finally:
        sock.close()


def _relay(deadline: float) -> int:
    path = os.environ.get("HIVE_SOCKET")
    agent = os.environ.get("HIVE_AGENT_ID")
    secret = os.environ.get("HIVE_SECRET")
    if not (path and agent and secret):
        return 0
    event = json.loads(_read_stdin(deadline))
    if not isinstance(event, dict):
        return 0
    frame = json.dumps(
        {"agent": agent, "secret": secret, "event": event}, ensure_ascii=False
    ).encode("utf-8", "surrogatepass")
    if len(frame) > MAX_FRAME_BYTES:
        return 0
    reply = json.loads(_exchange(path, frame + b"\n", deadline))
    if not isinstance(reply, dict):
        return 0
    code, out, err = reply.get("exit", 0), reply.get("stdout", ""), reply.get("stderr", "")
    if type(code) is not int or not 0 <= code <= 255:
        return 0
    if not isinstance(out, str) or not isinstance(err, str):
        return 0
    # Bytes, not text streams: the reply may hold characters the locale cannot encode.
    if out:
        sys.stdout.buffer.write(out.encode("utf-8", "replace"))
        sys.stdout.buffer.flush()
    if err:
        sys.stderr.buffer.write(err.encode("utf-8", "replace"))
        sys.stderr.buffer.flush()
    return code


def main() -> int:
    deadline = time.monotonic() + _timeout()
    try:
        return _relay(deadline)
    except Exception:
        # Whatever went wrong (office down or hung, malformed or deeply nested JSON either
        # way, which json reports as RecursionError), the agent must not be held up or
        # shown an error: failing open is the shim's whole contract.
        return 0


if __name__ == "__main__":
    sys.exit(main())
