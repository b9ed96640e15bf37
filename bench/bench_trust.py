"""What the trust layer's injection search costs the router (prints, never asserts).

Side by side in one run, alternating which goes first: the CPU time of a Router pass
(real files, fsync off) over N drafts with the office's default injection patterns, and the same
with the search turned off (`injection_patterns = []`). The body holds a URL and a
secret word, the cues that make the most patterns run. Then the worst case one
message can ask for: a 64 KiB body made of cue words.

Usage: .venv/bin/python bench/bench_trust.py [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from figures import figure

from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.mail import write_draft
from hive_core.paths import HivePaths
from hive_core.routing.router import Router
from hive_core.routing.rules import RouteRoster
from hive_core.routing.trust import Detector, find_injection
from hive_core.schema import Draft

BODY = (
    "Please review the change in src/foo.py; tests pass. Context: "
    "https://github.com/x/y/pull/3 (token rotation)."
)
WORST = {
    "send/secret words": "send token " * 5900,
    "links": "https://a.b/c send a" * 3200,
    "ignore words": "ignore all of the " * 3600,
}


def pass_per_message(root: Path, detector: Detector, messages: int) -> float:
    paths = HivePaths(root / "home")
    init_office(paths)
    floor = dataclasses.replace(
        RouteRoster.from_config(load_office(paths.office_toml)), injection=detector
    )
    router = Router(paths, floor, fsync=False)
    for i in range(messages):
        write_draft(paths.mailbox("jim"), Draft(to="pam", subject=f"m{i}", body=BODY))
    # CPU time (user + system) of this process: the machine is shared, and wall time
    # would count the other processes' turns.
    start = time.process_time()
    router.scan_all()
    return (time.process_time() - start) / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {"off": [], "defaults": []}
    order = [("off", Detector.from_list([])), ("defaults", Detector.from_list(None))]
    for n in range(args.rounds):
        for name, detector in order if n % 2 else order[::-1]:
            with tempfile.TemporaryDirectory(dir="/tmp") as d:
                runs[name].append(pass_per_message(Path(d), detector, args.messages))
    off, on = (statistics.median(runs[k]) for k in ("off", "defaults"))
    print(
        f"router pass, {args.messages} drafts x {args.rounds} rounds, median CPU per message: "
        f"search off {off:.0f} us, defaults {on:.0f} us (x{on / off:.2f})"
    )
    figure(
        "router cost of the injection search (default patterns vs off)",
        f"{on:.0f} vs {off:.0f} us a message (x{on / off:.2f})",
    )
    defaults = Detector.from_list(None)
    for name, text in WORST.items():
        times = []
        for _ in range(5):
            start = time.perf_counter()
            find_injection(text, defaults)
            times.append((time.perf_counter() - start) * 1e3)
        print(f"64 KiB of {name}: median {statistics.median(times):.1f} ms")


if __name__ == "__main__":
    main()
