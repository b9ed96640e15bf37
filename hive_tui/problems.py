"""The office's problems as the screen shows them: one line per cause.

Desks that could not start for the same reason (no login: every claude desk alike) are
one problem to the person, not one per desk: their failures are grouped by the hint
they share, and a group whose hint is what another problem already says (the office's
"login" line) is folded into that line.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from hive_core.agents.supervisor import start_failure_cause

AGENT = "agent:"


class Shown(msgspec.Struct, frozen=True):
    key: str  # what makes it one item across changes: a component, or a shared cause
    label: str  # whose problem it is: a component, or the desks that failed alike
    text: str  # the line
    # What is news about it: a detail, or for failed starts their shared cause (another
    # desk failing alike, or the same cause said by another line, is no news).
    said: str


def shown(problems: Mapping[str, str]) -> list[Shown]:
    """`problems`: detail by component (health.py), in the order they were reported."""
    causes: dict[str, list[str]] = {}
    plain: dict[str, str] = {}
    for component, detail in problems.items():
        cause = start_failure_cause(detail) if component.startswith(AGENT) else None
        if cause is None:
            plain[component] = detail
        else:
            causes.setdefault(cause, []).append(component.removeprefix(AGENT))
    out = []
    for component, detail in plain.items():
        folded = causes.pop(detail, None)
        also = f" ({', '.join(folded)}: {_exited(folded)})" if folded else ""
        out.append(
            Shown(key=component, label=component, text=f"{component}: {detail}{also}", said=detail)
        )
    for cause, ids in causes.items():
        if len(ids) == 1:
            key = f"{AGENT}{ids[0]}"
            out.append(Shown(key=key, label=key, text=f"{key}: {problems[key]}", said=cause))
        else:
            who = ", ".join(ids)
            text = f"{who}: {_exited(ids)}. {cause}"
            out.append(Shown(key=f"cause:{cause}", label=who, text=text, said=cause))
    return out


def _exited(ids: list[str]) -> str:
    return f"exited right after {'it' if len(ids) == 1 else 'they'} started"


def news(before: list[Shown], now: list[Shown]) -> tuple[list[Shown], list[Shown]]:
    """What pops up: the problems that are new (a cause once, whoever joins it later),
    and the ones that cleared."""
    said_before = {s.said for s in before}
    said_now = {s.said for s in now}
    keys = {s.key for s in now}
    new = [s for s in now if s.said not in said_before]
    # A line folded into another (the same cause) has not cleared.
    return new, [s for s in before if s.key not in keys and s.said not in said_now]
