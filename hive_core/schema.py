"""Every file format and frame of the office, as msgspec Structs.

One place for the shapes and the limits: the router, the CLI, the committer and the
app all encode and decode through these types, never through hand-built dicts.
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import Any, Literal, get_args

import msgspec

# --- limits and names (one fact, one place) -------------------------------------------

AGENT_ID_MAX = 32
# \Z, not $: `$` also matches before a final newline, and "jim\n" is not an id.
AGENT_ID_RE = re.compile(rf"^[a-z][a-z0-9-]{{0,{AGENT_ID_MAX - 1}}}\Z")
# The rule above as the person reads it, in every refusal and in the default office.toml.
AGENT_ID_RULE = (
    f"a lowercase letter, then up to {AGENT_ID_MAX - 1} lowercase letters, digits or '-'"
)
# An agent's name and role (office.toml, `hire`): one line each, on the floor and in
# every roster.
NAME_MAX = 64
ROLE_MAX = 200
# An agent's `env` may not set these. HIVE_*: the office gives each desk its HIVE_
# variables itself (its id, secret, sockets, home). The dynamic loader's LD_* and the
# few others that make a program load code before it runs (GCONV_PATH: glibc's charset
# modules; BASH_ENV: a script every non-interactive bash runs first): the office also
# starts programs with an agent's env (doctor's CLI checks, usage reads, login), and
# such a variable would run code inside them.
ENV_OFFICE_PREFIX = "HIVE_"
ENV_LOADER_PREFIX = "LD_"
ENV_LOADER_KEYS = frozenset({"GCONV_PATH", "BASH_ENV"})
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
RESERVED_IDS = frozenset({"human", "god", "broadcast", "triage", "router", "all"})
# Addresses a message may carry besides an agent id.
SPECIAL_RECIPIENTS = frozenset({"god", "human", "broadcast", "triage"})
HUMAN = "human"
ROUTER = "router"

SUBJECT_MAX = 200
BODY_MAX = 64 * 1024
# A message file larger than this is refused before it is parsed: the largest legal body
# JSON-escaped (a control character is 6 bytes, `\u0001`), plus room for the subject
# (12 bytes a character at worst) and the other fields.
MESSAGE_FILE_MAX = 6 * BODY_MAX + 16 * 1024
# Ids, conversations and task ids: short tokens that may name a file.
TOKEN_MAX = 128
# Nesting any of the office's JSON files may have. Messages are flat; a decoder recurses
# per level, so anything deeper is refused before it is decoded.
JSON_DEPTH_MAX = 32

Act = Literal["request", "inform", "propose", "query", "agree", "refuse", "done"]
ACTS: tuple[Act, ...] = get_args(Act)
REPLY_OBLIGING_ACTS = frozenset({"request", "query", "propose"})

# The agent CLIs office.toml may name; agents/providers.py has one Provider (agents/provider.py) for each.
ProviderName = Literal["claude", "codex", "gemini", "shell"]
PROVIDER_NAMES: tuple[ProviderName, ...] = get_args(ProviderName)


# --- messages -------------------------------------------------------------------------


class Draft(msgspec.Struct, kw_only=True):
    """What a sender may put in an outbox file. Fields the router owns (id, from, hops,
    requires_reply, created_at) are accepted and ignored, so a hand-written file that
    copies a delivered message still validates."""

    to: str
    act: Act = "inform"
    subject: str = ""
    body: str = ""
    in_reply_to: str | None = None
    conversation: str | None = None
    task: str | None = None
    needs_human: bool = False


class HopRecord(msgspec.Struct, kw_only=True):
    """The office's own record of a message it delivered (a line of run/threads/<day>.jsonl):
    what a reply to it inherits. Kept where agents do not write, so a planted copy of the
    message in an agent's folder cannot change a thread's hop count."""

    id: str
    hops: int
    conversation: str
    task: str | None = None
    # Who sent it and to what address: whom a web-enabled agent may answer (the sender
    # of a message addressed to it). None in records written before they were kept.
    sender: str | None = None
    to: str | None = None


class Message(msgspec.Struct, kw_only=True):
    """A routed message, as delivered into an inbox and archived in outbox/.sent."""

    id: str
    conversation: str
    in_reply_to: str | None
    sender: str = msgspec.field(name="from")
    to: str
    act: Act
    subject: str
    body: str
    task: str | None = None
    hops: int = 0
    requires_reply: bool = False
    needs_human: bool = False
    created_at: str
    # "web": its sender reads the web (office.toml `web = true`). Set by the router, never
    # taken from the sender; readers show such mail as material, not instructions.
    origin: Literal["web"] | None = None
    # Why the router thinks its text carries injected instructions (the manager was told).
    injection: str | None = None


# --- office.toml ----------------------------------------------------------------------


class OfficeSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str = "Scranton"
    manager: str = "michael"
    hop_cap: int = 8
    stop_block_cap: int = 3
    # The app's prefix key, written as in tmux ("ctrl+]", "ctrl+a", "ctrl+space").
    prefix_key: str = "ctrl+]"
    # alt+1..9 focus agent N in the app; false leaves them to the agent (and to a tmux
    # that binds M-1..M-9). The prefix and then 1..9 focuses agent N either way.
    alt_digits: bool = True
    # Bytes an agent's memory.md index may hold; the tidy keeps it within this.
    memory_budget: int = 8192
    # How notes are folded into memory.md: by the agent's own CLI (one model call with
    # no tools, falling back to the rule) or only by the rule (no model calls).
    memory_tidy: Literal["cli", "rule"] = "cli"
    # Retention of agents' notes and memory archive (hive_core/memory/retention.py): drop
    # pieces older than this many days, and the oldest while an agent's notes and archive
    # hold more than this many MB. None (the default): kept for ever.
    memory_retention_days: float | None = None
    memory_retention_mb: float | None = None
    # Regular expressions that make routed text look like injected instructions (flagged
    # to the manager); None: the defaults in routing/trust.py. A list replaces them.
    injection_patterns: list[str] | None = None
    # A working agent with neither a hook event nor pane output for this long is shown
    # stalled (hive_core/status.py).
    stall_after_s: float = 300.0
    # How the app tells the person an agent needs them: BEL and a desktop notification
    # (OSC 9 and 777), BEL only, or nothing (hive_core/clients/notify.py).
    notify: Literal["desktop", "bell", "off"] = "desktop"
    # A permission prompt open this long is told to the manager once (to the person when
    # the manager is the one asking; hive_core/team/escalations.py).
    permission_tell_after_s: float = 120.0
    # A shell command run once in each new agent worktree (copy `.env`, install);
    # hive_core/worktrees/.
    worktree_setup: str | None = None
    # How often the agents' branches are compared for files two of them change.
    worktree_check_s: float = 30.0
    # The CI-log cache (hive_core/ci/): a cached run older than this many days,
    # or the oldest runs while the cache holds more than this many MB, are deleted with
    # their memory entries by the office's sweep.
    ci_logs_max_age_days: float = 30.0
    ci_logs_max_mb: float = 500.0
    # The manager's floor view (hive_core/team/digest.py): a periodic digest of the peers'
    # traffic (counts per pair, requests waiting longer than `..._open_after_s`), or off.
    manager_watch: Literal["digest", "off"] = "digest"
    manager_digest_every_s: float = 900.0
    manager_digest_open_after_s: float = 1800.0
    # Where `hive`, `cth-hook` and the agents' CLIs live on a remote desk's host: this
    # folder's `bin/` comes first on the desk's PATH there (`hive-office remote-setup`
    # makes it; hive_core/remote/).
    remote_venv: str = "~/.local/share/hive-office/venv"
    # Each local desk's processes write only its own folders and read no other agent's
    # private memory (Landlock; docs/containment.md). false: every desk runs uncontained
    # (the map and `why` say so).
    contain: bool = True


class AgentSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: str
    name: str
    role: str = ""
    provider: ProviderName = "claude"
    cwd: str = "~"
    command: list[str] | None = None
    env: dict[str, str] = {}
    web: bool = False
    send_only: bool = False
    archived: bool = False
    model: str | None = None
    # Its own git worktree and branch; None: yes for a non-manager whose cwd is in a
    # git repository (hive_core/worktrees/plan.py).
    worktree: bool | None = None
    # A desk on another machine: anything `ssh` accepts as a destination, and extra ssh
    # options for it; the CLI runs there inside `ssh -tt` (hive_core/remote/). cwd is then
    # a folder on that host.
    host: str | None = None
    ssh_args: list[str] = []


class ModelPrice(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """USD per million tokens (office.toml `[prices."<model family>"]`); a key left out
    keeps the built-in price (hive_core/cost/__init__.py)."""

    input: float | None = None
    output: float | None = None
    cache_write: float | None = None
    cache_read: float | None = None


class OfficeConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    office: OfficeSettings = msgspec.field(default_factory=OfficeSettings)
    agents: list[AgentSpec] = []
    prices: dict[str, ModelPrice] = {}


# --- registry.json --------------------------------------------------------------------

# `running`: a hookless agent's process is alive (no hook events say more about it).
# `disconnected`: a remote desk whose ssh link dropped; the office reconnects it.
Status = Literal[
    "offline", "running", "idle", "working", "waiting", "exited", "archived", "disconnected"
]
# The explained state (hive_core/status.py decides it, with a sentence of why): `status`
# says what the hooks and the process say; this says what the person should make of it.
StatusKind = Literal[
    "working",
    "waiting",
    "idle",
    "idle_unread",
    "stalled",
    "rate_limited",
    "exited",
    "paused",
    "halted",
    "running",
    "offline",
    "archived",
    "disconnected",
]


class RegistryEntry(msgspec.Struct, kw_only=True):
    id: str
    name: str
    role: str
    provider: ProviderName
    manager: bool = False
    web: bool = False
    send_only: bool = False
    status: Status = "offline"
    paused: bool = False
    session_id: str | None = None
    last_tool: str | None = None
    last_seen: str | None = None
    pid: int | None = None
    # The explained state, one sentence of why, and the signals it was read from.
    state: StatusKind | None = None
    why: str | None = None
    evidence: str | None = None


class Registry(msgspec.Struct, kw_only=True):
    office: str
    manager: str
    agents: list[RegistryEntry] = []


# --- log.jsonl ------------------------------------------------------------------------

LogKind = Literal[
    "route", "bounce", "quarantine", "loop", "triage", "office", "agent", "hook", "board", "task"
]


class LogEvent(msgspec.Struct, kw_only=True, omit_defaults=True):
    ts: str
    kind: LogKind
    msg: str | None = None
    sender: str | None = msgspec.field(default=None, name="from")
    to: str | None = None
    recipients: list[str] = []
    act: str | None = None
    subject: str | None = None
    reason: str | None = None
    agent: str | None = None
    detail: str | None = None


# --- per-agent bookkeeping ------------------------------------------------------------


class Cursor(msgspec.Struct, kw_only=True):
    last_processed: str | None = None


# --- tasks.json -----------------------------------------------------------------------

TaskStatus = Literal["todo", "doing", "blocked", "review", "done"]


class TaskQuestion(msgspec.Struct, kw_only=True):
    question: str
    answer: str | None = None
    asked_by: str | None = None
    asked_at: str | None = None
    answered_at: str | None = None


class Task(msgspec.Struct, kw_only=True):
    id: str
    title: str
    spec: str = ""
    assignee: str | None = None
    status: TaskStatus = "todo"
    depends_on: list[str] = []
    priority: int = 2
    questions: list[TaskQuestion] = []
    result: str | None = None
    # How many times it has been given out: 1, and one more for each `hive task retry`.
    attempts: int = 1
    # Where its worker got to (`hive task checkpoint`): what a retry starts from.
    checkpoint: str | None = None
    checkpoint_by: str | None = None
    checkpoint_at: str | None = None
    created_at: str
    updated_at: str


class Ledger(msgspec.Struct, kw_only=True):
    tasks: list[Task] = []


def is_agent_id(value: str) -> bool:
    return bool(AGENT_ID_RE.match(value))


# JSON nesting once strings are gone: an opening bracket is +1 (byte 1), a closing one
# -1 (byte 255, read as a signed byte), everything else dropped.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NESTING = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))


def json_depth(raw: bytes) -> int:
    """How deep a recursive JSON decoder would go on `raw`, found without one (msgspec
    raises RecursionError on deep input, even in a field it skips). Exact for valid
    JSON; for invalid text an upper bound of how far a decoder gets before it fails."""
    steps = array("b", _JSON_STRING.sub(b"", raw).translate(_NESTING, _NOT_BRACKET))
    return max(accumulate(steps), default=0)


# --- hook frames (cth-hook <-> the office, one JSON line each way) ---------------------
# cth_hook itself is standard-library only and builds these by hand; these Structs are
# the office's side of the same contract.

# One frame's bytes, newline excluded. cth_hook (standard library only) repeats the
# number as MAX_FRAME_BYTES; tests/effects/test_cth_hook.py pins the two together.
HOOK_FRAME_MAX = 4 << 20


class HookFrame(msgspec.Struct, kw_only=True):
    agent: str
    secret: str
    event: dict[str, Any]


class HookReply(msgspec.Struct, kw_only=True):
    exit: int = 0
    stdout: str = ""
    stderr: str = ""


# --- the control socket (`hive-office type/pause/resume` <-> a running office) ----------

# The person's actions (hive_core/actions.py says what each does), `whoami`, an
# agent's proof of its identity, and `hive`, a remote desk's verb relayed to the office.
ControlCommand = Literal[
    "type",
    "pause",
    "resume",
    "halt",
    "archive",
    "spawn",
    "answer",
    "escalations",
    "status",
    "why",
    "hire",
    "whoami",
    "hive",
    # May this process do the person's verb `text` (stop, merge, ...) that runs outside
    # the office? control.decide_call answers, as for every action.
    "person",
    # A memory search the office runs with the model it keeps loaded, as whoever whoami
    # says the caller is (`memory`); without one, how that model stands.
    "memory",
]


class MemoryQuery(msgspec.Struct, kw_only=True, frozen=True):
    """A memory search for the office (hive_core/office/semantic.py), checked there as
    MemoryStore.search checks its arguments."""

    query: str
    scope: str = "all"
    mode: str = "semantic"
    limit: int = 10
    tags: tuple[str, ...] = ()
    source: str | None = None
    external_id: str | None = None


class ControlRequest(msgspec.Struct, kw_only=True):
    cmd: ControlCommand
    agent: str | None = None
    text: str = ""
    enter: bool = True
    # answer: the id of the message in the person's inbox being answered.
    message: str | None = None
    # whoami: the secret the caller's environment holds (HIVE_SECRET).
    secret: str | None = None
    # hire: the new agent's entry (`agent` is its id); checked as office.toml is
    # (hive_core/team/hire.py), so the provider is any text here.
    name: str = ""
    role: str = ""
    provider: str = ""
    web: bool = False
    # ... and, for a desk on another machine, its host and ssh words (its cwd, if given,
    # is `cwd` below: a folder on that host).
    host: str | None = None
    ssh_args: list[str] = []
    # hive (a remote desk's `hive` verb, relayed: hive_core/remote/relay.py): its words
    # after `hive`, its cwd on the remote host, and whether its stdin, stdout and stderr
    # are terminals there. After an ok reply the connection carries the verb's streams.
    argv: list[str] = []
    cwd: str = ""
    tty: list[bool] = []
    # memory: the search (None: only how the office's model stands).
    memory: MemoryQuery | None = None


class ControlReply(msgspec.Struct, kw_only=True):
    ok: bool
    error: str | None = None
    detail: str | None = None


class MailItem(msgspec.Struct, frozen=True, kw_only=True):
    """An unread message as its reader is told of it: the hook's digest
    (events/policy.py), the wake line (team/wake.py), a hookless pane's title."""

    id: str  # the file's name without .json: what `hive done` takes
    sender: str
    act: str
    subject: str
    needs_human: bool = False
    # The router's marks (Message): mail to read as material, not instructions.
    origin: str | None = None
    injection: str | None = None
