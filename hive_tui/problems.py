"""The office's problems as the screen shows them: one line per cause.

Desks that could not start for the same reason are one problem to the person, not one
per desk: their failures are grouped by the hint they share. A desk that exited for want
of a Claude login is folded into the office's "login" line, which says what to do; that
line is on screen from the start and does not pop up.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from hive_core.desks.supervisor import LOGIN_COMPONENT, NO_LOGIN_HINT, start_failure_cause

AGENT = "agent:"
# Failures whose cause another line says in full, by that line's component.
FOLDED = {LOGIN_COMPONENT: NO_LOGIN_HINT}
# Lines that are themselves the notice: shown, never popped up.
QUIET = frozenset({LOGIN_COMPONENT})


class Shown(msgspec.Struct, frozen=True):
    key: str  # what makes it one item across changes: a component, or a shared cause
    label: str  # whose problem it is: a component, or the desks that failed alike
    text: str  # the line
    # What is news about it: a detail, or for failed starts their shared cause (another
    # desk failing alike is no news).
    said: str
    # The components it shows (its own, and the desks' it groups or folds in).
    covers: frozenset[str]


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
        folded = causes.pop(FOLDED[component], []) if component in FOLDED else []
        also = f" ({', '.join(folded)}: {_exited(folded)})" if folded else ""
        covers = frozenset([component, *(AGENT + a for a in folded)])
        text = f"{component}: {detail}{also}"
        out.append(Shown(key=component, label=component, text=text, said=detail, covers=covers))
    for cause, ids in causes.items():
        covers = frozenset(AGENT + a for a in ids)
        if len(ids) == 1:
            key = f"{AGENT}{ids[0]}"
            text = f"{key}: {problems[key]}"
            out.append(Shown(key=key, label=key, text=text, said=cause, covers=covers))
        else:
            who = ", ".join(ids)
            text = f"{who}: {_exited(ids)}. {cause}"
            out.append(Shown(key=f"cause:{cause}", label=who, text=text, said=cause, covers=covers))
    return out


def _exited(ids: list[str]) -> str:
    return f"exited right after {'it' if len(ids) == 1 else 'they'} started"


def news(before: list[Shown], now: list[Shown]) -> tuple[list[Shown], list[Shown]]:
    """What pops up: the problems that are new (a cause once, whoever joins it later),
    and the ones that cleared."""
    said_before = {s.said for s in before}
    quiet = {*QUIET, *FOLDED.values()}
    new = [s for s in now if s.said not in said_before and not {s.key, s.said} & quiet]
    # A desk's line folded into another's, or grouped with others, has not cleared.
    shown_now = frozenset().union(*(s.covers for s in now))
    return new, [s for s in before if not s.covers & shown_now]
