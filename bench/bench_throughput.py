"""`cat` of a 50 MB file in a hive-office pane against a plain tmux pane of the same size
(prints, never asserts).

hive-office runs inside tmux (tests/tmux_support.py: an office of bash agents, the pane
zoomed); the reference is a plain tmux pane sized to the office pane's drawn interior.
Each run types `cat FILE` into one of them and reads back the wall time the shell
measured around it (cat ends when the last bytes are in the terminal's buffer, so the
time is how fast the terminal took them). Runs alternate between the two, the order
flipping each round, and the figure is the ratio of the medians.

A third reference is the floor: `cat` on a pty whose output is only read, with no
screen (PtySession's own read loop, as the office reads it), run after each round. A
pty hands its reader at most ~4 KB a read, so this is what the kernel and the machine
allow before any parsing or drawing.

Usage: .venv/bin/python bench/bench_throughput.py [--runs N] [--mb SIZE] [--cols C --rows R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from figures import figure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from hive_core.desks.pty_session import PtySession  # noqa: E402
from tests.support import wait_for  # noqa: E402
from tests.tmux_support import TmuxOffice  # noqa: E402

# Zoomed, the pane's interior is the screen less its box (2 columns, 2 rows) and the key
# line: a 162x50 terminal gives a 160x47 pane, the size the issue measured.
SCREEN = (162, 50)


def make_file(path: Path, size: int) -> None:
    """Lines of words of varying length, some coloured, like a build log or an agent's
    output (deterministic)."""
    rng = random.Random(12)
    words = [
        *("the", "office", "router", "agent", "pane", "emulator", "screen", "output"),
        "\x1b[32mpassed\x1b[0m", "\x1b[1;31mfailed\x1b[0m", "\x1b[2m(cached)\x1b[0m",
    ]  # fmt: skip
    with path.open("w") as out:
        written = 0
        while written < size:
            line = " ".join(rng.choice(words) for _ in range(rng.randint(2, 30))) + "\n"
            out.write(line)
            written += len(line.encode())


def timed_cat(office: TmuxOffice, target: str, data: Path, out: Path) -> float:
    """Seconds the shell in `target` saw `cat data` take."""
    out.unlink(missing_ok=True)
    command = f"s=$(date +%s%N); cat {data}; e=$(date +%s%N); echo $((e - s)) > {out}.tmp"
    office.tmux.type(target, f"clear; {command}; mv {out}.tmp {out}")
    nanoseconds = wait_for(lambda: out.exists() and out.read_text().strip(), "cat to end", 600)
    return int(nanoseconds) / 1e9


async def _bare_read(data: Path, rows: int, cols: int) -> float:
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    start = time.perf_counter()
    session = await PtySession.start(
        ["cat", str(data)], env={"PATH": os.defpath}, cwd=data.parent, rows=rows, cols=cols
    )
    session.attach(loop, lambda chunk: None, lambda code, sig: ended.set_result(None))
    await ended
    took = time.perf_counter() - start
    await session.terminate()
    return took


def bare_read(data: Path, rows: int, cols: int) -> float:
    """Seconds `cat data` takes on a pty that is read and nothing else."""
    return asyncio.run(_bare_read(data, rows, cols))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--cols", type=int, default=SCREEN[0])
    parser.add_argument("--rows", type=int, default=SCREEN[1])
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed (scripts/setup installs it)")
    root = Path(tempfile.mkdtemp(prefix="hive-thr-", dir="/tmp"))
    try:
        data = root / "output.txt"
        make_file(data, int(args.mb * 1e6))
        megabytes = data.stat().st_size / 1e6
        office = TmuxOffice(root, args.cols, args.rows)
        try:
            office.set_layout("zoom")
            box = office.box
            times: dict[str, list[float]] = {"office": [], "ref": [], "bare": []}
            load = os.getloadavg()[0]
            for run in range(args.runs):
                order = ("office", "ref") if run % 2 == 0 else ("ref", "office")
                for target in order:
                    times[target].append(timed_cat(office, target, data, root / "took"))
                    time.sleep(0.5)  # the screen settles before the next run
                times["bare"].append(bare_read(data, box.rows, box.cols))
                print(
                    f"run {run + 1}: office {times['office'][-1]:.2f} s, "
                    f"tmux {times['ref'][-1]:.2f} s, pty alone {times['bare'][-1]:.2f} s",
                    file=sys.stderr,
                )
        finally:
            office.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ours, tmux = statistics.median(times["office"]), statistics.median(times["ref"])
    bare = statistics.median(times["bare"])
    ratio = ours / tmux
    print(
        f"cat {megabytes:.1f} MB in a {box.cols}x{box.rows} pane, {args.runs} runs each, "
        f"interleaved: hive-office median {ours:.2f} s ({megabytes / ours:.1f} MB/s), "
        f"tmux {tmux:.2f} s ({megabytes / tmux:.1f} MB/s): {ratio:.2f}x tmux's time; "
        f"the pty read alone, no screen: {bare:.2f} s (load average {load:.1f} at the start)"
    )
    figure(
        f"`cat` of a {megabytes:.0f} MB file, hive-office pane vs a plain tmux pane, "
        f"{box.cols}x{box.rows}, {args.runs} runs each interleaved",
        f"median {ours:.2f} s vs {tmux:.2f} s in tmux: {ratio:.2f}x tmux's time "
        f"({megabytes / ours:.0f} MB/s vs {megabytes / tmux:.0f} MB/s); the pty read alone, "
        f"no screen: {bare:.2f} s",
        target="<= 1.0x tmux (issue 12 measured 1.82x)",
        ok=ratio <= 1.0,
    )


if __name__ == "__main__":
    main()
