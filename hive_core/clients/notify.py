"""Ringing the person when an agent needs them: what is new (a pure decision), and the
bytes that ring a terminal (BEL, OSC 9 and OSC 777 desktop notifications, through tmux).

Something needs the person when an agent's permission prompt opens (status waiting),
its CLI exits unexpectedly (it could not start, or exited with a non-zero code: a
signal is the office's stop or archive), it stalls, or an item waits for them (mail to
`human`, an escalation, a task question: escalations.waiting). Each rings once: an item
by its id, an agent's condition each time it begins (a new prompt after the last one
closed rings again; the same prompt seen twice does not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from hive_core.clients.protocol import AgentView
from hive_core.text import one_line

# More desktop notifications than this at once (the app opening on a full inbox) are
# summed up in one: a stack of popups tells the person less than a count.
DESKTOP_BURST = 3
TEXT_MAX = 200
TITLE = "hive-office"


class Alert(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # what makes it one item: a message id, or agent:condition
    text: str  # one line for the person


class Seen(msgspec.Struct, frozen=True, kw_only=True):
    """What has rung: the item ids, and each agent's condition as last observed."""

    items: frozenset[str] = frozenset()
    conditions: Mapping[str, str] = msgspec.field(default_factory=dict)


def agent_alert(state: AgentView) -> Alert | None:
    """The condition that makes an agent need the person now, if any."""
    who = f"{state.name} ({state.id})"
    if state.status == "waiting":
        prompt = state.prompt or "a permission prompt is open in its pane"
        return Alert(key=f"{state.id}:waiting", text=f"{who} is waiting for you: {prompt}")
    if state.status == "exited":
        if state.start_failed:
            return Alert(key=f"{state.id}:exited", text=f"{who} {state.start_failed}")
        if state.exit_status is not None and state.exit_status > 0:
            return Alert(
                key=f"{state.id}:exited",
                text=f"{who} exited with code {state.exit_status}; its pane shows why.",
            )
    if state.explained is not None and state.explained.kind == "stalled":
        return Alert(key=f"{state.id}:stalled", text=f"{who} stalled: {state.explained.why}")
    return None


def news(
    seen: Seen,
    agents: Mapping[str, Alert | None],
    items: Iterable[tuple[str, str]] | None = None,
) -> tuple[Seen, list[Alert]]:
    """What rings now, and what has rung after it. `agents`: the agents observed now and
    their condition (None: they need nothing); `items`: (id, text) of everything that
    waits for the person, when it was read again (None: not read this time)."""
    alerts = []
    conditions = dict(seen.conditions)
    for agent_id, alert in agents.items():
        if alert is None:
            conditions.pop(agent_id, None)
        elif conditions.get(agent_id) != alert.key:
            conditions[agent_id] = alert.key
            alerts.append(alert)
    rung = seen.items
    if items is not None:
        new = [(key, text) for key, text in items if key not in rung]
        alerts.extend(Alert(key=key, text=text) for key, text in new)
        rung = rung | {key for key, _ in new}
    return Seen(items=rung, conditions=conditions), alerts


def _clean(text: str) -> str:
    """One line without control characters (an agent wrote it; ESC or BEL would end the
    sequence early or start another)."""
    return one_line(text, TEXT_MAX)


def through_tmux(sequence: str) -> str:
    """tmux passes an escape sequence to the outer terminal only inside its DCS
    passthrough, with every ESC doubled (and only with `allow-passthrough on`)."""
    return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"


def desktop(text: str) -> tuple[str, str]:
    """A desktop notification in both common forms: OSC 9 (iTerm2, WezTerm, Ghostty,
    Windows Terminal) and OSC 777 (urxvt, foot, VTE terminals, Ghostty)."""
    body = _clean(text)
    return f"\x1b]9;{TITLE}: {body}\x07", f"\x1b]777;notify;{TITLE};{body}\x07"


def ring(alerts: list[Alert], mode: str, *, tmux: bool) -> str:
    """What to write to the person's terminal for `alerts`: one BEL (inside tmux it sets
    the window's bell flag), and in "desktop" mode a notification per alert (a burst is
    summed up). Empty when there is nothing to say or `notify = "off"`."""
    if not alerts or mode == "off":
        return ""
    if mode == "bell":
        return "\x07"
    shown = [a.text for a in alerts[:DESKTOP_BURST]]
    if len(alerts) > DESKTOP_BURST:
        shown[-1] = (
            f"{len(alerts) - DESKTOP_BURST + 1} more things need you (the Inbox lists them)."
        )
    notes = [sequence for text in shown for sequence in desktop(text)]
    return "\x07" + "".join(through_tmux(n) if tmux else n for n in notes)
