"""What the office answers to one hook event: pure decisions over plain data.

`decide()` takes the event (already mapped onto Claude's names by the provider), what
the office knows of the agent, its unread mail and a few office facts, and returns the
decision for the CLI plus the agent's new status. No disk, no socket, no clock: the
event plane (plane.py) gathers the inputs and applies the outcome.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

from hive_core.agents.provider import CanonicalEvent, HookDecision
from hive_core.schema import Status

WEB_TOOLS = frozenset({"WebFetch", "WebSearch"})
FILE_WRITE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
# The Stop drain stands back while the person is typing in that agent's pane.
TYPING_GRACE_S = 5.0
# A digest lists at most this many messages, then "and N more".
DIGEST_MAX_ITEMS = 8
DIGEST_SUBJECT_MAX = 80
# Ids and senders the router writes are far shorter; a hand-placed file's are cut here.
DIGEST_FIELD_MAX = 64
NOTE_TEXT_MAX = 200
# Session ids are kept and passed back to the CLI as `--resume <id>`: an id must look
# like one (Claude's are UUIDs), never like a flag or a paragraph.
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# Shell words that write or move files; a Bash command naming a protected path with one
# of these is refused. A heuristic: it catches mistakes, not a determined process.
_WRITE_WORDS = re.compile(
    r"(>|\btee\b|\bmv\b|\bcp\b|\brm\b|\bsed\s+-i|\btruncate\b|\bdd\b|\bln\b|\bchmod\b|"
    r"\btouch\b|\bmkdir\b|\brsync\b|\bgit\b|\bpython3?\b|\bperl\b)"
)


@dataclass(frozen=True)
class MailItem:
    id: str
    sender: str
    act: str
    subject: str
    needs_human: bool = False


@dataclass(frozen=True)
class AgentView:
    id: str
    name: str
    role: str
    manager: bool
    web: bool
    paused: bool = False
    halted: bool = False
    stop_blocks: int = 0
    # Read only; the office passes its own set rather than copy 20k ids per hook.
    announced: AbstractSet[str] = frozenset()
    typed_ago: float | None = None  # seconds since the person last typed in its pane
    memory: str = ""  # its memory.md index, given to it when a session starts


@dataclass(frozen=True)
class OfficeFacts:
    office: str
    home: Path
    hive: Path
    manager: str
    stop_block_cap: int
    roster: Sequence[tuple[str, str, str]] = ()  # (id, name, role)
    web_agents: Sequence[str] = ()


@dataclass(frozen=True)
class Outcome:
    decision: HookDecision
    status: Status | None = None
    session_id: str | None = None
    last_tool: str | None = None
    stop_blocks: int = 0
    announce: frozenset[str] = field(default_factory=frozenset)
    note: str | None = None  # one line for log.jsonl (None: nothing worth logging)


def decide(
    event: CanonicalEvent,
    agent: AgentView,
    unread: Sequence[MailItem],
    office: OfficeFacts,
    ids: frozenset[str] | None = None,
) -> Outcome:
    """`ids`: the ids of `unread`, if the caller already has them (the office's index
    does; at 20k unread, hashing them per hook is most of a hook's cost)."""
    unread_ids = frozenset(m.id for m in unread) if ids is None else ids
    name = event.name
    if name == "SessionStart":
        sid = event.session_id
        well_formed = sid is None or SESSION_ID_RE.match(sid) is not None
        return Outcome(
            HookDecision(context=session_context(agent, unread, office)),
            status="idle",
            session_id=sid if well_formed else None,
            stop_blocks=0,
            announce=unread_ids,
            note="session started"
            if well_formed
            else "session started; its malformed session id was not kept",
        )
    if name == "UserPromptSubmit":
        news = unread_ids - agent.announced
        fresh = [m for m in unread if m.id in news] if news else []
        return Outcome(
            HookDecision(context=digest(fresh) if fresh else None),
            status="working",
            stop_blocks=0,
            announce=frozenset(m.id for m in fresh),
            note="turn started",
        )
    if name == "PreToolUse":
        reason = tool_policy(event, agent, office)
        summary = tool_summary(event)
        if reason:
            return Outcome(
                HookDecision(deny=reason),
                status="working",
                last_tool=tool_activity(event),
                stop_blocks=agent.stop_blocks,
                note=f"denied {summary}: {reason}",
            )
        return Outcome(
            HookDecision(),
            status="working",
            last_tool=tool_activity(event),
            stop_blocks=agent.stop_blocks,
            note=summary,
        )
    if name == "PostToolUse":
        news = unread_ids - agent.announced
        urgent = [m for m in unread if m.id in news and _urgent(m, office)] if news else []
        return Outcome(
            HookDecision(context=digest(urgent) if urgent else None),
            status="working",
            last_tool=tool_activity(event),
            stop_blocks=agent.stop_blocks,
            announce=frozenset(m.id for m in urgent),
        )
    if name == "Notification":
        waiting = event.notification_type == "permission_prompt"
        return Outcome(
            HookDecision(),
            status="waiting" if waiting else None,
            stop_blocks=agent.stop_blocks,
            # The CLI's text, into the log and the app: one line, and short.
            note=f"needs you: {one_line(event.message or 'permission prompt', NOTE_TEXT_MAX)}"
            if waiting
            else None,
        )
    if name == "Stop":
        return stop_drain(event, agent, unread, office, unread_ids)
    return Outcome(HookDecision(), status="exited", note="session ended")


def stop_drain(
    event: CanonicalEvent,
    agent: AgentView,
    unread: Sequence[MailItem],
    office: OfficeFacts,
    unread_ids: frozenset[str],
) -> Outcome:
    """Block the end of a turn while there is mail to read, within the guards."""
    # A Stop without stop_hook_active ends a fresh turn: the consecutive count restarts.
    blocks = agent.stop_blocks if event.stop_hook_active else 0
    idle = Outcome(HookDecision(), status="idle", stop_blocks=blocks, note="turn ended")
    if not unread:
        return idle
    if agent.paused or agent.halted:
        return Outcome(
            HookDecision(),
            status="idle",
            stop_blocks=blocks,
            note=f"turn ended; {len(unread)} unread left (paused)",
        )
    if agent.typed_ago is not None and agent.typed_ago < TYPING_GRACE_S:
        return Outcome(
            HookDecision(),
            status="idle",
            stop_blocks=blocks,
            note=f"turn ended; {len(unread)} unread left (the person is typing)",
        )
    if blocks >= office.stop_block_cap:
        return Outcome(
            HookDecision(),
            status="idle",
            stop_blocks=blocks,
            note=f"turn ended; released after {blocks} blocks with {len(unread)} unread",
        )
    return Outcome(
        HookDecision(block=digest(unread)),
        status="working",
        stop_blocks=blocks + 1,
        announce=unread_ids,
        note=f"kept working: {len(unread)} unread (block {blocks + 1} of {office.stop_block_cap})",
    )


# --- context texts ------------------------------------------------------------------


def digest(items: Sequence[MailItem]) -> str:
    """A short list of messages that tells the agent what to do; never the bodies.

    One line per message whatever the files hold: every field is rendered on one line
    with control characters gone, so a subject cannot forge a line of its own."""
    count = len(items)
    lines = [f"You have {count} unread message{'s' if count != 1 else ''}:"]
    for m in items[:DIGEST_MAX_ITEMS]:
        mid, sender, act = (one_line(f, DIGEST_FIELD_MAX) for f in (m.id, m.sender, m.act))
        subject = one_line(m.subject, DIGEST_SUBJECT_MAX)
        flag = " [needs the person]" if m.needs_human else ""
        lines.append(f"- {mid} from {sender} ({act}): {subject or '(no subject)'}{flag}")
    if count > DIGEST_MAX_ITEMS:
        lines.append(f"- and {count - DIGEST_MAX_ITEMS} more")
    lines.append("Run `hive inbox` to read them, act on each, then `hive done ID`.")
    return "\n".join(lines)


def one_line(text: str, limit: int) -> str:
    """`text` as one line of at most `limit` characters: anything unprintable (newlines,
    other line separators, control and format characters) becomes a space, runs of
    space fold into one, and a cut is marked with an ellipsis."""
    if not text.isprintable():
        text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def session_context(agent: AgentView, unread: Sequence[MailItem], office: OfficeFacts) -> str:
    team = "; ".join(
        f"{aid} ({name}, {role or 'no role'}{', manager' if aid == office.manager else ''})"
        for aid, name, role in office.roster
        if aid != agent.id
    )
    lines = [
        f"You are {agent.name} (id {agent.id}) in the office {office.office}: {agent.role}.",
        f"Teammates: {team or 'none'}.",
        "Coordinate only through the `hive` command (hive --help); the office routes mail.",
    ]
    if agent.memory.strip():
        lines.append(
            f"Your memory (memory.md; add to it with `hive memory note`):\n{agent.memory.strip()}"
        )
    if unread:
        lines.append(digest(unread))
    else:
        lines.append("Your inbox is empty.")
    return "\n".join(lines)


def _urgent(message: MailItem, office: OfficeFacts) -> bool:
    return message.needs_human or message.sender in (office.manager, "human")


# --- tool policy ----------------------------------------------------------------------


def tool_policy(event: CanonicalEvent, agent: AgentView, office: OfficeFacts) -> str | None:
    """A reason to deny this tool call, or None to let the CLI's own rules decide."""
    if agent.halted:
        return (
            "The person halted you. Stop here: do not retry this or start anything else; "
            "finish your turn with a one-line summary of where you stopped."
        )
    if agent.paused:
        return (
            "The person has paused you. Do not retry this or anything else; end your turn "
            "now with a one-line note of where you are, and wait for the person."
        )
    tool = event.tool_name or ""
    if tool in WEB_TOOLS and not agent.web:
        helpers = ", ".join(office.web_agents) or "nobody in this office"
        return (
            f"{tool} is only for agents with web access ({helpers}). Ask one of them: "
            f"`hive send --to {office.web_agents[0] if office.web_agents else 'god'} "
            "--act query --subject ... --body ...`."
        )
    if tool in FILE_WRITE_TOOLS:
        raw = event.tool_input.get(FILE_WRITE_TOOLS[tool])
        # A Codex patch edits several files at once: every one of them must pass.
        many = event.tool_input.get("file_paths")
        targets = [raw] if isinstance(raw, str) else []
        targets += [p for p in many if isinstance(p, str)] if isinstance(many, list) else []
        for target in targets:
            reason = _write_refusal(_resolve(target, event.cwd), agent, office)
            if reason:
                return reason
    if tool == "Bash":
        command = event.tool_input.get("command")
        if isinstance(command, str):
            return _bash_refusal(command, event.cwd, agent, office)
    return None


def _resolve(raw: str, cwd: str | None) -> Path:
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute() and cwd:
        path = Path(cwd) / path
    return Path(os.path.normpath(path))


def _write_refusal(path: Path, agent: AgentView, office: OfficeFacts) -> str | None:
    hive, home = office.hive, office.home
    if _inside(path, home / "agent-settings") or _inside(path, home / "run"):
        return "The office's settings and sockets are not yours to change; leave them alone."
    if not _inside(path, hive):
        return None
    rel = path.relative_to(hive).parts
    if rel[:2] == ("agents", agent.id):
        return None
    if rel and rel[0] in ("board.md", "tasks.json"):
        if agent.manager:
            return None
        return (
            f"Only the manager ({office.manager}) writes {rel[0]}. File a request with "
            '`hive triage "..."` or message god with `hive send --to god ...`.'
        )
    if rel[:1] == ("agents",) and len(rel) > 1:
        return (
            f"{rel[1]}'s folder belongs to {rel[1]}; never write there. Send a message "
            f"instead: `hive send --to {rel[1]} --act inform --subject ... --body ...`."
        )
    return (
        "The office writes this part of the hive itself (mail, log, registry, triage). "
        "Use the `hive` command: send, reply, done, triage."
    )


def _bash_refusal(
    command: str, cwd: str | None, agent: AgentView, office: OfficeFacts
) -> str | None:
    stripped = command.lstrip()
    if stripped.startswith("hive ") or stripped == "hive":
        return None
    if not _WRITE_WORDS.search(command):
        return None
    for token in re.findall(r"[^\s'\";|&<>()]+", command):
        if "/" not in token and token not in ("board.md", "tasks.json"):
            continue
        reason = _write_refusal(_resolve(token, cwd), agent, office)
        if reason:
            return reason + " (Your shell command would write where you must not.)"
    return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


# A Bash call that is one of these `hive` verbs is recorded as the verb itself, so the
# map can send the avatar to the conference room, where the board and the ledger hang.
BOARD_VERBS = ("hive board", "hive task")


def tool_activity(event: CanonicalEvent) -> str | None:
    """What the agent is doing, for its `last_tool`: the tool's name, or a board verb."""
    if event.tool_name == "Bash":
        command = event.tool_input.get("command")
        if isinstance(command, str):
            words = " ".join(command.split()[:2])
            if words in BOARD_VERBS:
                return words
    return event.tool_name


def tool_summary(event: CanonicalEvent) -> str:
    tool = event.tool_name or "tool"
    detail = ""
    for key in ("command", "file_path", "notebook_path", "url", "query", "pattern", "path"):
        value = event.tool_input.get(key)
        if isinstance(value, str) and value:
            detail = value.splitlines()[0][:120]
            break
    return f"{tool}: {detail}" if detail else tool
