"""Plain-text views of mail, the roster and the log for `hive` and the app (pure: data
in, text out).

Everything shown here was written by someone else (another agent, the router), so
control characters are made visible: an escape sequence in a message must not be able
to repaint the reader's terminal.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from hive_core.marks import caution
from hive_core.schema import LogEvent, Message, Registry
from hive_core.text import one_line
from hive_core.text import shown as clean  # the one rule (hive_core/text.py)

PREVIEW_WIDTH = 100


def preview(text: str, width: int = PREVIEW_WIDTH) -> str:
    """Someone else's text as one line for a reader: control characters shown, not obeyed."""
    return one_line(clean(text), width)


def _flags(msg: Message) -> str:
    flags = []
    if msg.requires_reply:
        flags.append("reply expected")
    if msg.needs_human:
        flags.append("needs human")
    if msg.task:
        flags.append(f"task {msg.task}")
    return f"  [{', '.join(flags)}]" if flags else ""


def inbox(messages: list[Message]) -> str:
    if not messages:
        return "No unread mail."
    sender_w = max(len(m.sender) for m in messages)
    act_w = max(len(m.act) for m in messages)
    noun = "message" if len(messages) == 1 else "messages"
    lines = [f"{len(messages)} unread {noun}, oldest first:"]
    for m in messages:
        subject = preview(m.subject) or "(no subject)"
        line = f"  {m.id}  {m.sender:<{sender_w}}  {m.act:<{act_w}}  {subject}{_flags(m)}"
        lines.append(clean(line, lines=False))
        if (mark := caution(m.origin, m.injection)) is not None:
            lines.append(f"      {mark}")
        if m.body.strip():
            lines.append(f"      {preview(m.body)}")
    lines.append(
        "Read one: `hive read ID`. Answer: `hive reply ID --body ...`. Then `hive done ID`."
    )
    return "\n".join(lines)


def message(msg: Message, state: str) -> str:
    """One message in full; `state` says where it sits (unread, done, sent)."""
    act = f"{msg.act} (reply expected)" if msg.requires_reply else msg.act
    fields = [
        ("id", msg.id),
        ("from", msg.sender),
        ("to", msg.to),
        ("act", act),
        ("subject", clean(msg.subject) or "(no subject)"),
        ("date", msg.created_at),
        ("thread", msg.conversation),
        ("reply to", msg.in_reply_to),
        ("task", msg.task),
        ("hops", str(msg.hops) if msg.hops else None),
        ("needs human", "yes" if msg.needs_human else None),
        ("caution", caution(msg.origin, msg.injection)),
        ("state", state),
    ]
    # Every field is the file's word (anyone can drop a message in an inbox): one line each.
    lines = [f"{name + ':':<13}{clean(value, lines=False)}" for name, value in fields if value]
    lines.append("")
    lines.append(clean(msg.body).rstrip("\n") or "(empty body)")
    if state == "unread":
        lines.append("")
        lines.append(f"Answer: `hive reply {msg.id} --body ...`. Processed: `hive done {msg.id}`.")
    return "\n".join(lines)


# Explained states the roster says why for (schema.StatusKind); `hive-office why` has all.
ATTENTION = frozenset(
    {"waiting", "idle_unread", "stalled", "rate_limited", "exited", "paused", "halted"}
)


def status_words(status: str, pid: int | None, exit_status: int | None = None) -> str:
    """A status as a person reads it: a running process with its pid, an exit with its
    code (`exit_status` is the code, or minus the signal)."""
    if status == "running" and pid is not None:
        return f"running (pid {pid})"
    if status == "exited" and exit_status is not None:
        how = f"signal {-exit_status}" if exit_status < 0 else f"code {exit_status}"
        return f"exited ({how})"
    return status


def roster(registry: Registry, caller: str, costs: Mapping[str, str] | None = None) -> str:
    """`costs`: each agent's estimated cost as the office last summed it (cost.label)."""
    rows: list[tuple[str, ...]] = [("ID", "NAME", "PROVIDER", "STATUS", "COST", "ROLE")]
    for entry in registry.agents:
        marks = ("*" if entry.manager else "") + (" (you)" if entry.id == caller else "")
        extras = [x for x, on in (("web", entry.web), ("send-only", entry.send_only)) if on]
        role = entry.role + (f" [{', '.join(extras)}]" if extras else "")
        status = status_words(entry.status, entry.pid)
        if entry.state and entry.state != entry.status:  # the explained state says more
            status += f" [{entry.state}]"
        cost = (costs or {}).get(entry.id, "-")
        cells = [entry.id + marks, entry.name, entry.provider, status, cost, role]
        rows.append(tuple(clean(cell, lines=False) for cell in cells))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [f"{registry.office}: manager {registry.manager} (*), you are {caller}"]
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)]
        lines.append("  ".join([*padded, row[5]]).rstrip())
    # Why, for the states someone should act on (the office's sentence, cleaned).
    for entry in registry.agents:
        if entry.why and entry.state in ATTENTION:
            lines.append(f"  {entry.id}: {preview(entry.why, 300)}")
    lines.append("Address a teammate by ID; also god (the manager), human, broadcast, triage.")
    return "\n".join(lines)


def log_event(event: LogEvent, detail_width: int = PREVIEW_WIDTH) -> str:
    """`hive log`'s line for `event`; a reason or detail past `detail_width` is cut (the
    app's Log tab, which wraps, passes more)."""
    when = event.ts[:19].replace("T", " ")
    parts = []
    if event.sender or event.to:
        route = f"{event.sender or '?'} -> {event.to or '?'}"
        delivered = ", ".join(event.recipients)
        if delivered and delivered != event.to:
            route += f" ({delivered})"
        parts.append(route)
    elif event.agent:
        parts.append(event.agent)
    if event.act:
        parts.append(event.act)
    if event.subject:
        parts.append(repr(preview(event.subject, 60)))
    if event.msg:
        parts.append(event.msg)
    for extra in (event.reason, event.detail):
        if extra:
            parts.append(f"- {preview(extra, detail_width)}")
    # The log is a file in the hive: its lines are shown, never obeyed, whoever wrote them.
    return clean(f"{when}  {event.kind:<10}  {'  '.join(parts)}".rstrip(), lines=False)


def why_text(agent: str, detail: str | None) -> str:
    """The office's answer to `why` (an AgentStatus as JSON) as the person reads it, in
    the CLI and the app alike: `jim: idle_unread`, the sentence, and the evidence."""
    from hive_core.status import AgentStatus

    status = msgspec.json.decode(detail or "null", type=AgentStatus | None)
    if status is None:
        return f"{agent}: the office has not explained it yet; ask again in a moment."
    lines = [
        f"{agent}: {status.kind}",
        preview(status.why, 2000),
        f"evidence: {preview(status.evidence, 500)}",
    ]
    if status.uncontained is not None:
        lines.append(f"uncontained: {preview(status.uncontained, 500)}")
    return "\n".join(lines)
