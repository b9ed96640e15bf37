"""Keystroke to echo in a focused hive-office pane against a plain tmux pane (prints,
never asserts).

hive-office runs inside tmux (tests/tmux_support.py: an office of bash agents); the
reference is a plain tmux pane of the same size running the same bash. tmux's
`pipe-pane -O` copies what each pane's program writes to its terminal into a FIFO read
here: for the plain pane that is bash's echo, for the office's pane it is the app's
repaint. A key is sent with `tmux send-keys` and the clock stops when its character
arrives in that pane's output, so both sides include the same send-keys start-up.
Keys alternate between the two panes, one at a time.

Usage: .venv/bin/python bench/bench_keys_latency.py [--keys N]
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

from figures import figure, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.tmux_support import TmuxOffice  # noqa: E402

TIMEOUT_S = 5.0
LINE = 40  # keys typed before the line is cleared again


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=200, help="keys per pane")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed (scripts/setup installs it)")
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
