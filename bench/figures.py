"""How a benchmark hands a figure to bench/run_all: one machine-readable line each.

    from figures import figure
    figure("idle CPU of the office, 50 agents + app, 30 s", "0.41% of a core",
           target="<= 2% of a core", ok=cpu <= 2.0, command="bench/bench_scale.py idle")

prints, beside the bench's own prose:

    FIGURE {"what": ..., "measured": ..., "target": ..., "ok": true, "command": ...}

`ok` is True (target met), False (over) or None (no target: a reference figure).
`command` defaults to the running script, e.g. "bench/bench_scale.py"; give the
sub-command when the script has several. run_all collects these lines from every
bench; `bench/run_all --figures` writes them as the table in docs/figures.md, one row
each, in the order printed, so a bench decides its rows' wording and order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PREFIX = "FIGURE "


def figure(
    what: str, measured: str, *, target: str = "", ok: bool | None = None, command: str = ""
) -> None:
    line = {
        "what": what,
        "measured": measured,
        "target": target,
        "ok": ok,
        "command": command or f"bench/{Path(sys.argv[0]).name}",
    }
    print(PREFIX + json.dumps(line), flush=True)


def parse(line: str) -> dict[str, Any] | None:
    """The figure a printed line carries, or None for any other line."""
    if not line.startswith(PREFIX):
        return None
    try:
        found = json.loads(line[len(PREFIX) :])
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) and "what" in found else None


def percentile(samples: list[float], q: float) -> float:
    """The sample at quantile q (0..1) of `samples`, nearest rank: what every bench's
    p50 and p99 mean."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
