"""What the office answers to one hook event: pure decisions over plain data.

`decide()` takes the event (already mapped onto Claude's names by the provider), what
the office knows of the agent, its unread mail and a few office facts, and returns the
decision for the CLI plus the agent's new status. No disk, no socket, no clock: the
event plane (plane.py) gathers the inputs and applies the outcome.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hive_core.agents.provider import CanonicalEvent, HookDecision
from hive_core.ci import rewrite_command
from hive_core.events.shellwords import Simple, commands, program
from hive_core.marks import caution
from hive_core.paths import HivePaths, Place
from hive_core.schema import MailItem, Status
from hive_core.team.leases import Lease, holder_of, on_host, refusal
from hive_core.text import one_line

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
# What a Bash command may not do unless the agent has `web = true`: reach the network.
# The one list (_network_use reads it): programs that are the network; verbs of
# package managers that download; git verbs that reach a remote, when given a remote URL
# (a remote by name may be a folder on this machine); what an interpreter's inline code
# (-c, -e, stdin) uses to open a connection. rsync counts when a side is remote.
NET_PROGRAMS = frozenset(
    {"curl", "wget", "nc", "ncat", "netcat", "socat", "ssh", "scp", "sftp", "telnet", "ftp"}
    | {"aria2c", "lynx", "w3m", "npx", "uvx", "pnpx", "bunx"}
)
NET_VERBS: dict[str, frozenset[str]] = {
    "pip": frozenset({"install", "download", "wheel"}),
    "uv": frozenset({"add", "sync", "install", "lock"}),
    "npm": frozenset({"install", "i", "add", "ci", "update", "exec", "create"}),
    "yarn": frozenset({"add", "install", "dlx", "create", ""}),
    "pnpm": frozenset({"add", "install", "i", "dlx", "update", "create"}),
    "bun": frozenset({"add", "install", "i", "x", "create"}),
    "gem": frozenset({"install"}),
    "cargo": frozenset({"install", "add", "fetch"}),
    "go": frozenset({"get", "install"}),
}
NET_GIT_VERBS = frozenset({"clone", "fetch", "pull", "push", "ls-remote", "archive"})
NET_CODE = re.compile(
    r"\b(?:urllib|urllib3|requests|httpx|aiohttp|http\.client|socket|ftplib|smtplib|"
    r"paramiko|LWP|HTTP::Tiny|IO::Socket|Net::|open-uri|Net::HTTP|axios|XMLHttpRequest|"
    r"WebSocket)\b|\bfetch\s*\(|require\(\s*['\"](?:node:)?(?:https?|net|tls|dgram)['\"]|"
    r"\bfrom\s+['\"](?:node:)?(?:https?|net)['\"]"
)
_INTERPRETERS = frozenset({"python", "node", "perl", "ruby", "deno", "bun", "php"})
# A remote side of git/rsync/scp: a URL with a scheme other than file, or host:path.
_REMOTE = re.compile(r"^(?!file:)[A-Za-z][A-Za-z0-9+.-]*://|^[^/:\s]+:(?!/)")
# Programs whose every argument is a file they change, and those that change only the
# last one (the destination). Anything else writes only through its redirections.
_WRITES_ALL = frozenset(
    {"tee", "mv", "rm", "rmdir", "unlink", "shred", "touch", "mkdir", "truncate", "chmod"}
    | {"chown", "chgrp", "chattr", "setfacl", "mkfifo", "patch"}
)
_WRITES_LAST = frozenset({"cp", "ln", "install", "rsync", "link"})
# Options whose value is a file the program writes (a research agent's downloads).
_OUTPUT_OPTIONS = {
    "curl": frozenset({"-o", "--output"}),
    "wget": frozenset({"-O", "--output-document", "-P", "--directory-prefix"}),
}
_EDITS_IN_PLACE = frozenset({"sed", "perl", "ruby"})  # with -i
# git's options that take the next word as their value.
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
_GIT_READS = frozenset(
    {"status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse"}
    | {"describe", "shortlog", "cat-file", "rev-list", "help", "version", "whatchanged"}
)
# Quoted text in inline code that may name a file.
_QUOTED = re.compile(r"(['\"])([^'\"\n]{1,4096})\1")
# Inline code can quote many strings; past this many the rest are not resolved.
CODE_PATHS_MAX = 64


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
    host: str | None = None  # a remote desk's host: its paths are on that machine


@dataclass(frozen=True)
class OfficeFacts:
    office: str
    home: Path
    hive: Path
    manager: str
    stop_block_cap: int
    roster: Sequence[tuple[str, str, str]] = ()  # (id, name, role)
    web_agents: Sequence[str] = ()
    # The hook program's folder (the cth_hook package): no agent may change it.
    hook_program: Path | None = None
    # Turns an absolute path into the one the kernel would open (os.path.realpath:
    # links followed). Given by the office so this module stays pure; home, hive and
    # hook_program must already be in that form. Tests give a lexical one.
    resolve: Callable[[str], str] = os.path.normpath
    # The live file leases (the plane drops expired ones and those of done tasks), and
    # where a resolved path is: (repository, path relative to its top), leases.py's
    # `Repositories.place`, given by the office (it reads the disk).
    leases: Sequence[Lease] = ()
    repo_place: Callable[[str], tuple[str, str]] | None = None


@dataclass(frozen=True)
class Outcome:
    decision: HookDecision
    status: Status | None = None
    session_id: str | None = None
    last_tool: str | None = None
    stop_blocks: int = 0
    announce: frozenset[str] = field(default_factory=frozenset)
    note: str | None = None  # one line for log.jsonl (None: nothing worth logging)
    # Stop at the block cap: the unread mail let go (the office tells the manager).
    released: frozenset[str] = field(default_factory=frozenset)


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
        rewrite = ci_log_rewrite(event)
        return Outcome(
            HookDecision(rewrite=rewrite),
            status="working",
            last_tool=tool_activity(event),
            stop_blocks=agent.stop_blocks,
            note=summary if rewrite is None else f"{summary}, through the CI-log cache",
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
    if name == "StopFailure":
        # The turn ended on an API error (a rate limit, a quota): the CLI ignores any
        # reply, and the agent is back at its prompt.
        error = one_line(event.error or "unknown", NOTE_TEXT_MAX)
        text = one_line(event.message or "", NOTE_TEXT_MAX)
        return Outcome(
            HookDecision(),
            status="idle",
            stop_blocks=0,
            note=f"turn failed: {error}" + (f": {text}" if text else ""),
        )
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
            released=unread_ids,
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
        if (mark := caution(m.origin, m.injection)) is not None:
            flag += " " + mark
        lines.append(f"- {mid} from {sender} ({act}): {subject or '(no subject)'}{flag}")
    if count > DIGEST_MAX_ITEMS:
        lines.append(f"- and {count - DIGEST_MAX_ITEMS} more")
    lines.append("Run `hive inbox` to read them, act on each, then `hive done ID`.")
    return "\n".join(lines)


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


def ci_log_rewrite(event: CanonicalEvent) -> dict[str, Any] | None:
    """The Bash call's input with a plain `gh run view ID --log[-failed]` made a read of
    the office's CI-log cache (ci.rewrite_command); None to leave the call as it is."""
    command = event.tool_input.get("command")
    if event.tool_name != "Bash" or not isinstance(command, str):
        return None
    cached = rewrite_command(command)
    return None if cached is None else {**event.tool_input, "command": cached}


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
        return f"{tool} is only for agents with web access. {_ask_web_agents(office)}"
    if tool in FILE_WRITE_TOOLS:
        raw = event.tool_input.get(FILE_WRITE_TOOLS[tool])
        # A Codex patch edits several files at once: every one of them must pass.
        many = event.tool_input.get("file_paths")
        targets = [raw] if isinstance(raw, str) else []
        targets += [p for p in many if isinstance(p, str)] if isinstance(many, list) else []
        for target in targets:
            path = _resolve(target, event.cwd, office)
            reason = _write_refusal(path, agent, office) if path else None
            if reason:
                return reason
    if tool == "Bash":
        command = event.tool_input.get("command")
        if isinstance(command, str):
            return _bash_refusal(command, event.cwd, agent, office)
    return None


def _ask_web_agents(office: OfficeFacts) -> str:
    if not office.web_agents:
        return (
            "Nobody in this office has web access (`web = true` in office.toml). Ask the "
            f"manager: `hive send --to {office.manager} --act query --subject ... --body ...`."
        )
    return (
        f"Ask one who has it ({', '.join(office.web_agents)}) by mail: `hive send --to "
        f"{office.web_agents[0]} --act query --subject ... --body ...`."
    )


def _resolve(raw: str, cwd: str | None, office: OfficeFacts) -> Path | None:
    """The file `raw` names, as the kernel would open it from `cwd`; None if it is
    relative and the cwd is unknown, or names no file at all (a NUL byte)."""
    if "\0" in raw or (cwd and "\0" in cwd):
        return None
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):
        if not cwd:
            return None
        path = os.path.join(cwd, path)
    return Path(office.resolve(path))


def _write_refusal(path: Path, agent: AgentView, office: OfficeFacts) -> str | None:
    if office.hook_program is not None and _inside(path, office.hook_program):
        return _locked("The hook program (cth_hook)")
    place = HivePaths(office.home).locate(path)
    if place is not None and place.kind != "home_other":
        return _place_refusal(place, agent, office)
    if not office.leases or office.repo_place is None:
        return None
    # An agent's worktree is in the home (home_other): a file there may be leased.
    where = on_host(agent.host, str(path)) if agent.host else office.repo_place(str(path))
    lease = holder_of(office.leases, *where, agent.id)
    return None if lease is None else refusal(lease)


# What the office keeps for itself, by HivePaths.locate's kind, and how to name it.
_LOCKED = {
    "home": "The office home",
    "office_toml": "office.toml",
    "run": "run/ (the office's sockets and state)",
    "agent_settings": "agent-settings/ (your CLI's settings and hooks)",
    "memory_db": "memory.db",
    "git": "The hive's git metadata",
}


def _locked(what: str) -> str:
    return (
        f"{what} is locked: only the office and the person change it. Leave it alone; "
        "if it needs a change, ask the person: `hive send --to human --act request "
        "--subject ... --body ...`."
    )


def _place_refusal(place: Place, agent: AgentView, office: OfficeFacts) -> str | None:
    kind, owner = place
    if kind in _LOCKED:
        return _locked(_LOCKED[kind])
    if kind == "home_other" or owner == agent.id:
        return None
    if kind in ("board", "tasks"):
        if agent.manager:
            return None
        name = "board.md" if kind == "board" else "tasks.json"
        return (
            f"Only the manager ({office.manager}) writes {name}. File a request with "
            f'`hive triage "..."` or message the manager with `hive send --to {office.manager} ...`.'
        )
    if owner is not None:
        return (
            f"{owner}'s folder belongs to {owner}; never write there. Send a message "
            f"instead: `hive send --to {owner} --act inform --subject ... --body ...`."
        )
    return (
        "The office writes this part of the hive itself (mail, log, registry, triage). "
        "Use the `hive` command: send, reply, done, triage."
    )


def _bash_refusal(
    command: str, cwd: str | None, agent: AgentView, office: OfficeFacts
) -> str | None:
    # Only variables whose value the office knows; $HOME is left to `~` expansion.
    variables = {"HIVE_HOME": str(office.home), "HOME": "~", "PWD": "."}
    simple = commands(command, cwd, variables)
    if not agent.web:
        for cmd in simple:
            what = _network_use(cmd)
            if what:
                return (
                    f"{what} reaches the network, and you are not a research agent "
                    f"(`web = true` in office.toml). {_ask_web_agents(office)}"
                )
    for cmd in simple:
        reason = _command_refusal(cmd, agent, office)
        if reason:
            return reason + " (Your shell command would write where you must not.)"
    return None


def _network_use(cmd: Simple) -> str | None:
    """The network use of one simple command, named for the reason; None if none seen."""
    name, args = program(cmd.words)
    if name in _INTERPRETERS and args[:2] == ("-m", "pip"):
        name, args = "pip", args[2:]
    if name in NET_PROGRAMS:
        return f"`{name}`"
    operands = [a for a in args if not a.startswith("-")]
    if name in NET_VERBS:
        verb = operands[0] if operands else ""
        if name == "uv" and verb in ("pip", "tool") and len(operands) > 1:
            verb = operands[1]
        return f"`{name} {verb}`".replace(" `", "`") if verb in NET_VERBS[name] else None
    if name == "git":
        verb, rest, _ = _git_parts(args)
        source = next((a for a in rest if not a.startswith("-")), "")
        if verb in NET_GIT_VERBS and _REMOTE.match(source):
            return f"`git {verb}` of a remote URL"
    if name == "rsync" and any(_REMOTE.match(a) for a in operands):
        return "`rsync` to or from another machine"
    if name in _INTERPRETERS and NET_CODE.search(_inline_code(args) + cmd.stdin):
        return f"`{name}` code that opens a connection"
    return None


def _inline_code(args: tuple[str, ...]) -> str:
    """What an interpreter runs from its command line (-c/-e and the like)."""
    code = [
        args[i + 1]
        for i, a in enumerate(args[:-1])
        if a in ("-c", "-e", "-E", "--eval", "-p", "--print", "-r")
    ]
    return "\n".join(code)


def _command_refusal(cmd: Simple, agent: AgentView, office: OfficeFacts) -> str | None:
    name, args = program(cmd.words)
    targets = list(cmd.writes)
    operands = [a for a in args if not a.startswith("-")]
    if name in _OUTPUT_OPTIONS:
        targets += [args[i + 1] for i, a in enumerate(args[:-1]) if a in _OUTPUT_OPTIONS[name]]
    if name in _WRITES_ALL:
        # An --option=FILE names its file after the `=`.
        targets += operands + [a.split("=", 1)[1] for a in args if a.startswith("--") and "=" in a]
    elif name == "dd":
        targets += [a[3:] for a in operands if a.startswith("of=")]
    elif name in _WRITES_LAST and operands:
        targets.append(operands[-1])
    elif name in _EDITS_IN_PLACE and any(
        a == "--in-place" or (a[:1] == "-" and a[1:2] != "-" and "i" in a[1:3]) for a in args
    ):
        targets += operands
    elif name == "find" and any(a in ("-delete", "-exec", "-execdir", "-ok") for a in args):
        # The folders searched: the words before the first test or action.
        targets += args[: next((i for i, a in enumerate(args) if a[:1] in "-(!"), len(args))]
    elif name == "git":
        verb, rest, repo = _git_parts(args)
        if verb and verb not in _GIT_READS:
            targets += [a for a in rest if not a.startswith("-")]
            # It changes the repository it runs in: the hive's is the committer's alone.
            where = _resolve(repo, cmd.cwd, office) if repo else None
            if where is not None and _inside(where, office.hive):
                return _locked(_LOCKED["git"])
    elif name in _INTERPRETERS:
        # Code can open any file: every quoted string in it that could name one counts.
        code = _inline_code(args) + cmd.stdin
        quoted = [m.group(2) for m in _QUOTED.finditer(code)][:CODE_PATHS_MAX]
        targets += [q for q in quoted if "/" in q or "." in q] + operands
    for target in targets:
        path = _resolve(target, cmd.cwd, office) if target else None
        reason = _write_refusal(path, agent, office) if path else None
        if reason:
            return reason
    return None


def _git_parts(args: tuple[str, ...]) -> tuple[str, tuple[str, ...], str]:
    """git's verb, the words after it, and the folder it runs on (`-C DIR`, else ".")."""
    repo = "."
    i = 0
    while i < len(args):
        a = args[i]
        if a in _GIT_VALUED and i + 1 < len(args):
            repo = os.path.join(repo, args[i + 1]) if a == "-C" else repo
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return a, args[i + 1 :], repo
    return "", (), repo


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
