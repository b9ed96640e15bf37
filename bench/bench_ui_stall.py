"""Does the app keep painting while the office routes a burst? (prints, never asserts)

The app runs headless (`App.run_test`) with four idle shell agents. Another process
drops N message files into one agent's outbox (9 in 10 to the manager, 1 in 10 to the
person), as a flood of hand-written mail would; the watcher finds them. A ticker on the
app's event loop asks for a 10 ms sleep over and over; how late each wake-up comes is
the stall a key press or a paint would have suffered. Measured from the drop until
every message is delivered and the app shows the counts, plus 1 s; beside it, the same
ticker over 3 s of the same app idle just before the drop (what the machine's own load
costs: these 2 cores are shared). Beside each figure, the same less the time the loop
thread stood ready to run but got no CPU from the kernel (its run delay, Linux
schedstat): what is left is the app's own doing (a worker holding the GIL, work on the
loop), which the machine's load cannot explain.

Usage: .venv/bin/python bench/bench_ui_stall.py [--messages N] [--runs R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from figures import figure

from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_tui.app import HiveApp

AGENTS = ["a0", "a1", "a2", "a3"]
TICK_S = 0.010
SETTLE_S = 1.0
IDLE_S = 3.0
# Writes the drafts atomically (temp name, then rename) from its own process, like agents.
DROPPER = """
import os, sys
outbox, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    to = "human" if i % 10 == 0 else "a0"
    tmp = os.path.join(outbox, f".tmp-{i}")
    with open(tmp, "w") as f:
        f.write('{"to": "%s", "subject": "burst %d", "body": "message %d of the burst"}' % (to, i, i))
    os.rename(tmp, os.path.join(outbox, f"m{i:05d}.json"))
"""


def make_home(root: Path) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(
        '[office]\nmanager = "a0"\n'
        + "".join(
            f'\n[[agents]]\nid = "{a}"\nname = "Agent {a}"\nprovider = "shell"\ncwd = "{root}"\n'
            'command = ["bash", "--norc", "--noprofile", "-i"]\n'
            for a in AGENTS
        )
    )
    init_office(paths)
    return paths


def delivered(paths: HivePaths) -> int:
    return sum(
        len([n for n in os.listdir(paths.mailbox(who).inbox) if n.endswith(".json")])
        for who in ("a0", "human")
    )


def run_delay_s() -> float:
    """How long this thread has stood runnable without a CPU (0 where not measured)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except OSError:
        return 0.0


@dataclass
class Lateness:
    late: list[float] = field(default_factory=list)
    own: list[float] = field(default_factory=list)  # less the run delay


async def ticker(lateness: Lateness, stop: asyncio.Event) -> None:
    while not stop.is_set():
        t, waited = time.perf_counter(), run_delay_s()
        await asyncio.sleep(TICK_S)
        late = time.perf_counter() - t - TICK_S
        lateness.late.append(late)
        lateness.own.append(max(0.0, late - (run_delay_s() - waited)))


def summary(lateness: Lateness) -> dict[str, float]:
    ms = sorted(x * 1000 for x in lateness.late)
    own = sorted(x * 1000 for x in lateness.own)
    return {
        "p50": statistics.median(ms),
        "p99": ms[int(len(ms) * 0.99)],
        "max": ms[-1],
        "own_p99": own[int(len(own) * 0.99)],
        "own_max": own[-1],
    }


async def tick_for(seconds: float) -> Lateness:
    lateness = Lateness()
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(lateness, stop))
    await asyncio.sleep(seconds)
    stop.set()
    await tick
    return lateness


async def one_run(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        paths = make_home(Path(d))
        office = Office(paths, program=hive)
        app = HiveApp(office)
        async with app.run_test(size=(160, 48)) as pilot:
            end = time.monotonic() + 30
            while not all(office.supervisor.sessions.get(a) for a in AGENTS):
                assert time.monotonic() < end, "agents never started"
                await pilot.pause(0.05)
            await pilot.pause(1.0)  # prompts drawn, standup delivered
            idle = await tick_for(IDLE_S)
            base = await asyncio.to_thread(delivered, paths)
            human_before = len(app.escalations)
            manager_before = app.unread.get("a0", 0)
            lateness = Lateness()
            stop = asyncio.Event()
            tick = asyncio.create_task(ticker(lateness, stop))
            t0 = time.perf_counter()
            dropper = await asyncio.create_subprocess_exec(
                sys.executable, "-c", DROPPER, str(paths.mailbox("a1").outbox), str(n)
            )
            await dropper.wait()
            t_dropped = time.perf_counter() - t0
            want_human = human_before + (n + 9) // 10
            t_delivered: float | None = None
            while True:
                await asyncio.sleep(0.05)
                if t_delivered is None and await asyncio.to_thread(delivered, paths) >= base + n:
                    t_delivered = time.perf_counter() - t0
                shown = (
                    len(app.escalations) >= want_human
                    and app.unread.get("a0", 0) >= manager_before + n
                )
                if t_delivered is not None and shown:
                    t_shown = time.perf_counter() - t0
                    break
                if time.perf_counter() - t0 > 120:
                    raise SystemExit("the burst was not delivered within 120 s")
            await asyncio.sleep(SETTLE_S)
            stop.set()
            await tick
            await pilot.press("ctrl+right_square_bracket", "q")
    return {
        **summary(lateness),
        **{f"idle_{k}": v for k, v in summary(idle).items()},
        "ticks": len(lateness.late),
        "dropped": t_dropped,
        "delivered": t_delivered,
        "shown": t_shown,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = [asyncio.run(one_run(args.messages)) for _ in range(args.runs)]
    for r in results:
        print(
            f"  run: loop lateness p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, max {r['max']:.0f} ms "
            f"(without the kernel's run delay: p99 {r['own_p99']:.1f} ms, max "
            f"{r['own_max']:.0f} ms; {r['ticks']:.0f} ticks; idle just before: p99 {r['idle_p99']:.1f} ms, max "
            f"{r['idle_max']:.0f} ms); dropped in {r['dropped']:.2f} s, delivered at "
            f"{r['delivered']:.2f} s, on screen at {r['shown']:.2f} s"
        )
    keys = ("p50", "p99", "max", "own_p99", "own_max", "idle_p99", "idle_max", "shown")
    med = {k: statistics.median(r[k] for r in results) for k in keys}
    print(
        f"UI stall, {args.messages} messages into one outbox with the app open, {args.runs} runs "
        f"(medians): p50 {med['p50']:.1f} ms, p99 {med['p99']:.1f} ms, max {med['max']:.0f} ms "
        f"(target p99 <= 50 ms, max <= 100 ms); less the kernel's run delay: p99 "
        f"{med['own_p99']:.1f} ms, max {med['own_max']:.0f} ms; the same app idle: p99 {med['idle_p99']:.1f} ms, "
        f"max {med['idle_max']:.0f} ms; all on screen at {med['shown']:.2f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    figure(
        f"UI stall while {args.messages:,} files dropped into one outbox are routed, the app "
        f"open (headless, 4 idle shell agents), {args.runs} run(s)",
        f"event-loop lateness of a 10 ms timer: p50 {med['p50']:.1f} ms, p99 {med['p99']:.1f} ms, "
        f"max {med['max']:.0f} ms (less the kernel's run delay: p99 {med['own_p99']:.1f} ms, "
        f"max {med['own_max']:.0f} ms); the same app idle just before: p99 {med['idle_p99']:.1f} ms, "
        f"max {med['idle_max']:.0f} ms; all on screen at {med['shown']:.1f} s "
        f"(load average {os.getloadavg()[0]:.1f})",
        target="p99 <= 50 ms, max <= 100 ms (routing on the loop, before: p99 and max 1.6-1.8 s "
        "in this bench, max 0.85-1.8 s in issue 18)",
        ok=med["p99"] <= 50 and med["max"] <= 100,
    )


if __name__ == "__main__":
    main()
