"""Hook round trip and fail-open time of cth-hook. Measures; asserts nothing.

    .venv/bin/python bench/bench_hook.py [--runs 200] [--hung-runs 5]

Round trip: from starting the shim with a Stop event on stdin to its exit, against a
socket server in this process that replies at once. Each way of starting the shim is
timed interleaved with bare interpreter starts, so machine noise hits all alike:
  - `python3 -c pass` from PATH (the issue's reference, whatever python3 resolves to);
  - `<venv python> -c pass` (same interpreter as the hooks, site start-up included);
  - `<venv python> -I -S -c pass` (the floor: no site, no environment).
Fail-open: the socket path absent (office down), a stale socket file (office died) and a
socket that accepts but never replies (office hung; bounded by HIVE_HOOK_TIMEOUT).
Targets (issue 3): p50 <= 30 ms and within 1.5x of the bare interpreter; fail-open
with the office down <= 0.3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import cth_hook.__main__ as shim

PYTHON = sys.executable
STOP_EVENT = json.dumps(
    {
        "session_id": "0f6c5d3e-9a1b-4c2d-8e7f-123456789abc",
        "transcript_path": "/tmp/session.jsonl",
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "Done.",
    }
).encode()
REPLY = json.dumps(
    {"exit": 0, "stdout": json.dumps({"decision": "block", "reason": "1 unread"}), "stderr": ""}
).encode()


def serve(path: str, *, reply: bool) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)
    held: list[socket.socket] = []

    def handle(conn: socket.socket) -> None:
        conn.makefile("rb").readline()
        conn.sendall(REPLY + b"\n")
        conn.close()

    def loop() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            if reply:
                threading.Thread(target=handle, args=(conn,), daemon=True).start()
            else:
                held.append(conn)  # accepted, never answered

    threading.Thread(target=loop, daemon=True).start()
    return sock


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, input=STOP_EVENT, capture_output=True, env=env)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited {proc.returncode}: {proc.stderr.decode()}")
    return took


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(title: str, results: dict[str, list[float]], reference: str | None) -> None:
    print(f"\n{title}")
    print(f"  {'command':<44} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  ratio p50")
    ref = statistics.median(results[reference]) if reference else None
    for name, samples in results.items():
        p50 = statistics.median(samples)
        ratio = f"{p50 / ref:.2f}x" if ref else ""
        print(
            f"  {name:<44} {p50 * 1e3:8.1f} {percentile(samples, 0.99) * 1e3:8.1f}"
            f" {max(samples) * 1e3:8.1f}  {ratio}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--hung-runs", type=int, default=5)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-hook-", dir="/tmp"))
    try:
        live = serve(str(root / "office.sock"), reply=True)
        hung = serve(str(root / "hung.sock"), reply=False)
        stale = root / "stale.sock"
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).bind(str(stale))

        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        env.update(HIVE_AGENT_ID="jim", HIVE_SECRET="s", HIVE_SOCKET=str(root / "office.sock"))
        python3 = shutil.which("python3") or "python3"
        console = str(Path(PYTHON).parent / "cth-hook")
        commands = {
            f"python3 -c pass ({python3})": [python3, "-c", "pass"],
            "venv python -c pass": [PYTHON, "-c", "pass"],
            "venv python -I -S -c pass": [PYTHON, "-I", "-S", "-c", "pass"],
            "cth-hook (console script)": [console],
            "venv python -m cth_hook": [PYTHON, "-m", "cth_hook"],
            "venv python -I -S cth_hook/__main__.py": [PYTHON, "-I", "-S", shim.__file__],
        }
        results: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm the page cache before timing
            timed(cmd, env)
        for _ in range(args.runs):
            for name, cmd in commands.items():
                results[name].append(timed(cmd, env))
        print(
            f"cth-hook round trip, Stop event, {args.runs} runs interleaved, {sys.version.split()[0]}"
        )
        report("ratio against venv python -c pass", results, "venv python -c pass")
        report("ratio against the floor", results, "venv python -I -S -c pass")

        fast = [PYTHON, "-I", "-S", shim.__file__]
        fail_open: dict[str, list[float]] = {}
        for label, path, runs in (
            ("socket path absent", root / "absent.sock", args.runs // 4),
            ("stale socket file (refused)", stale, args.runs // 4),
            (
                f"hung office, default {shim.DEFAULT_TIMEOUT:g} s deadline",
                root / "hung.sock",
                args.hung_runs,
            ),
        ):
            fail_open[label] = [
                timed(fast, {**env, "HIVE_SOCKET": str(path)}) for _ in range(max(runs, 1))
            ]
        fail_open["hung office, HIVE_HOOK_TIMEOUT=0.3"] = [
            timed(fast, {**env, "HIVE_SOCKET": str(root / "hung.sock"), "HIVE_HOOK_TIMEOUT": "0.3"})
            for _ in range(max(args.hung_runs, 1))
        ]
        report("fail-open (shim run as venv python -I -S <file>)", fail_open, None)
        live.close()
        hung.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
