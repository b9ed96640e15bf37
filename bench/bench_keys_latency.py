"""Keystroke to echo in a focused hive-office pane against a plain tmux pane (prints,
never asserts).

hive-office runs inside tmux (tests/tmux_support.py: an office of bash agents); the
reference is a plain tmux pane of the same size running the same bash. tmux's
`pipe-pane -O` copies what each pane's program writes to its terminal into a FIFO read
here: for the plain pane that is bash's echo, for the office's pane it is the app's
repaint. A key is sent with `tmux send-keys` and the clock stops when its character
arrives in that pane's output, so both sides include the same send-keys start-up.
Keys alternate between the two panes, one at a time.

--burst N: keystroke to echo in the office's pane while the office routes N messages
  (issue 25): another process drops N message files into Beta's outbox (9 in 10 to the
  manager, whose pane is focused, 1 in 10 to the person), as bench_ui_stall.py does,
  and keys go one at a time, alternating between the office's pane and the plain tmux
  pane (the same machine's floor under the same burst: tmux, send-keys and bash), from
  the first drop until every message is delivered; --runs bursts, p50/p90/p99/max over
  all their keys. The app is the person's: a client of the office running in the
  background.

Usage: .venv/bin/python bench/bench_keys_latency.py [--keys N] [--burst N [--runs R]]
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figure, percentile

from hive_core.paths import HivePaths

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.tmux_support import AGENTS, TmuxOffice  # noqa: E402

TIMEOUT_S = 5.0
LINE = 40  # keys typed before the line is cleared again
BURST_TARGET = "p99 <= 50 ms, max <= 150 ms"
# Writes the drafts atomically (temp name, then rename) from its own process, like agents.
DROPPER = """
import os, sys
outbox, n, manager = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(n):
    to = "human" if i % 10 == 0 else manager
    tmp = os.path.join(outbox, f".tmp-{i}")
    with open(tmp, "w") as f:
        f.write('{"to": "%s", "subject": "burst %d", "body": "message %d of the burst"}' % (to, i, i))
    os.rename(tmp, os.path.join(outbox, f"m{i:05d}.json"))
"""


class Output:
    """What one pane's program writes, through tmux's pipe-pane and a FIFO."""

    def __init__(self, office: TmuxOffice, target: str, fifo: Path) -> None:
        os.mkfifo(fifo)
        office.tmux("pipe-pane", "-O", "-t", target, f"cat > {fifo}")
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)

    def drain(self) -> None:
        while select.select([self.fd], [], [], 0.05)[0]:
            if not os.read(self.fd, 65536):
                break

    def wait_for(self, char: bytes, start: float) -> float:
        seen = b""
        while char not in seen:
            left = start + TIMEOUT_S - time.perf_counter()
            if left <= 0:
                raise SystemExit(f"no echo of {char!r} within {TIMEOUT_S} s")
            if select.select([self.fd], [], [], left)[0]:
                seen += os.read(self.fd, 65536)
        return time.perf_counter() - start


def delivered(paths: HivePaths, manager: str) -> int:
    return sum(
        len([n for n in os.listdir(paths.mailbox(who).inbox) if n.endswith(".json")])
        for who in (manager, "human")
    )


def burst_keys(
    office: TmuxOffice, outputs: dict[str, Output], n: int
) -> tuple[dict[str, list[float]], float]:
    """Keys typed into the office's pane and the plain pane, alternating, while `n`
    messages are routed: each one's echo time by pane, and the seconds from the first
    drop until all were delivered."""
    paths = HivePaths(office.home)
    manager, sender = AGENTS[0][0], AGENTS[1][0]
    base = delivered(paths, manager)
    dropper = subprocess.Popen(
        [sys.executable, "-c", DROPPER, str(paths.mailbox(sender).outbox), str(n), manager]
    )
    t0 = time.perf_counter()
    latency: dict[str, list[float]] = {"office": [], "ref": []}
    done_at: float | None = None
    typed = 0
    while done_at is None:
        char = string.ascii_lowercase[typed % 26]
        for target in ("office", "ref") if typed % 2 == 0 else ("ref", "office"):
            output = outputs[target]
            output.drain()
            start = time.perf_counter()
            office.tmux.type(target, char, enter=False)
            latency[target].append(output.wait_for(char.encode(), start))
        typed += 1
        if typed % LINE == 0:
            office.keys_both("C-u")
        if dropper.poll() is not None and delivered(paths, manager) >= base + n:
            done_at = time.perf_counter() - t0
        elif time.perf_counter() - t0 > 120:
            raise SystemExit("the burst was not delivered within 120 s")
    office.keys_both("C-u")
    return latency, done_at


def spread(ms: list[float]) -> str:
    p50, p90, p99 = (percentile(ms, q) for q in (0.5, 0.9, 0.99))
    return f"p50 {p50:.1f} ms, p90 {p90:.1f} ms, p99 {p99:.1f} ms, max {max(ms):.0f} ms"


def burst_main(keys_burst: int, runs: int) -> None:
    # The machine's 1-min load as the run starts and as it ends: on shared cores the
    # tail moves with it, and a run's own bursts raise the second.
    load_before = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="hive-keys-", dir="/tmp"))
    latency: dict[str, list[float]] = {"office": [], "ref": []}
    took: list[float] = []
    try:
        office = TmuxOffice(root)
        try:
            outputs = {t: Output(office, t, root / f"{t}.fifo") for t in ("office", "ref")}
            for _ in range(runs):
                one, seconds = burst_keys(office, outputs, keys_burst)
                for target, values in one.items():
                    latency[target] += values
                took.append(seconds)
                time.sleep(1.0)  # the app's counts settle between bursts
        finally:
            office.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ms = {t: [v * 1000 for v in values] for t, values in latency.items()}
    p99 = percentile(ms["office"], 0.99)
    load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    measured = (
        f"{len(ms['office'])} keys over {runs} burst(s) of {keys_burst:,} messages (each "
        f"delivered in {statistics.median(took):.1f} s, median): {spread(ms['office'])}; "
        f"a plain tmux pane meanwhile, alternating: {spread(ms['ref'])} "
        f"(1-min load average {load})"
    )
    print(f"keystroke to echo while messages route: {measured}")
    figure(
        f"keystroke to echo in the focused pane (the client) while {keys_burst:,} messages "
        "route, alternating with a plain tmux pane (each includes `tmux send-keys` starting)",
        measured,
        target=BURST_TARGET,
        ok=p99 <= 50 and max(ms["office"]) <= 150,
        command=f"bench/bench_keys_latency.py --burst {keys_burst} --runs {runs}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=200, help="keys per pane")
    parser.add_argument("--burst", type=int, default=0, help="messages routed meanwhile")
    parser.add_argument("--runs", type=int, default=3, help="bursts (with --burst)")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed (scripts/setup installs it)")
    if args.burst:
        burst_main(args.burst, args.runs)
        return
    root = Path(tempfile.mkdtemp(prefix="hive-keys-", dir="/tmp"))
    latency: dict[str, list[float]] = {"office": [], "ref": []}
    try:
        office = TmuxOffice(root)
        try:
            outputs = {t: Output(office, t, root / f"{t}.fifo") for t in ("office", "ref")}
            for n in range(args.keys):
                # Lower-case letters only: none is a tmux key name or a shell binding.
                char = string.ascii_lowercase[n % 26]
                for target in ("office", "ref") if n % 2 == 0 else ("ref", "office"):
                    output = outputs[target]
                    output.drain()
                    start = time.perf_counter()
                    office.tmux.type(target, char, enter=False)
                    latency[target].append(output.wait_for(char.encode(), start))
                if n % LINE == LINE - 1:
                    office.keys_both("C-u")
        finally:
            office.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ms = {t: [v * 1000 for v in values] for t, values in latency.items()}
    p50 = {t: statistics.median(v) for t, v in ms.items()}
    p99 = {t: percentile(v, 0.99) for t, v in ms.items()}
    print(
        f"keystroke to echo, {args.keys} keys per pane, alternating: hive-office p50 "
        f"{p50['office']:.1f} ms, p99 {p99['office']:.1f} ms; tmux p50 {p50['ref']:.1f} ms, "
        f"p99 {p99['ref']:.1f} ms (both include `tmux send-keys` starting, about the "
        f"same for each)"
    )
    figure(
        f"keystroke to echo in a focused pane, {args.keys} keys, alternating with a plain "
        "tmux pane (each includes `tmux send-keys` starting)",
        f"hive-office p50 {p50['office']:.1f} ms, p99 {p99['office']:.1f} ms; "
        f"tmux p50 {p50['ref']:.1f} ms, p99 {p99['ref']:.1f} ms "
        f"(+{p50['office'] - p50['ref']:.1f} ms at p50)",
        target="within one frame (16.7 ms) of tmux at p50",
        ok=p50["office"] - p50["ref"] <= 1000 / 60,
    )


if __name__ == "__main__":
    main()
