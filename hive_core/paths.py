"""Where every file of an office lives. The only module that knows the layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, NamedTuple

from hive_core import invocation
from hive_core.schema import HUMAN

DEFAULT_HOME = "~/.hive-office"
# The demo's own home (hive_core/demo/office.py), when neither --home nor HIVE_HOME names one.
DEFAULT_DEMO_HOME = "~/.hive-office-demo"
# AF_UNIX socket paths hold at most 107 bytes on Linux (every socket above is one).
SOCKET_PATH_MAX = 107


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """--home wins, then HIVE_HOME, then ~/.hive-office (the caller's, when the office
    runs a verb for it: hive_core/invocation.py)."""
    raw = home or invocation.getenv("HIVE_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().absolute()


def demo_home(home: str | None) -> Path:
    """--home, then $HIVE_HOME, then the demo's own folder. Whichever it is, the demo
    uses it only if it is empty or a previous demo's (demo/office.py claim_demo_home)."""
    return Path(home or os.environ.get("HIVE_HOME") or DEFAULT_DEMO_HOME).expanduser().absolute()


# NamedTuples, not dataclasses: every `hive` command builds these, and the dataclasses
# module (with inspect) is a tenth of an agent's mail call.
class HivePaths(NamedTuple):
    home: Path

    # --- home level ---
    @property
    def office_toml(self) -> Path:
        return self.home / "office.toml"

    @property
    def hive(self) -> Path:
        return self.home / "hive"

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def pid_file(self) -> Path:
        return self.run / "office.pid"

    @property
    def office_log(self) -> Path:
        """What a detached office prints (hive_core/office/daemon.py): its stdout and stderr."""
        return self.run / "office.log"

    @property
    def unscoped_told(self) -> Path:
        """Left once `hive-office` has told the person that this home's office runs
        outside a systemd scope (hive_core/office/daemon.py), so it is said once."""
        return self.run / "unscoped-told"

    @property
    def health_file(self) -> Path:
        """What is wrong with the running office (hive_core/health.py)."""
        return self.run / "health.json"

    @property
    def usage_file(self) -> Path:
        """Each agent's sessions and token sums, as the office last read them (agents/usage.py)."""
        return self.run / "usage.json"

    @property
    def kick_socket(self) -> Path:
        return self.run / "kick.sock"

    @property
    def hook_socket(self) -> Path:
        return self.run / "hook.sock"

    @property
    def control_socket(self) -> Path:
        return self.run / "control.sock"

    @property
    def client_socket(self) -> Path:
        """Where the app attaches to the office (hive_core/clients/client_socket.py)."""
        return self.run / "client.sock"

    # --- remote desks (hive_core/remote/) ---
    def desk_socket(self, agent_id: str, kind: Literal["hook", "control"]) -> Path:
        """A remote desk's own hook or control socket: its ssh connection forwards the
        remote side's socket here, so the office knows whose desk a connection came from."""
        return self.run / "desks" / f"{agent_id}.{kind}.sock"

    def ssh_master(self, agent_id: str) -> Path:
        """The ControlPath of a remote desk's ssh connection (its diffs and merges reuse it)."""
        return self.run / "ssh" / f"{agent_id}.sock"

    def ssh_log(self, agent_id: str) -> Path:
        """ssh's own messages for a remote desk (`-E`): why a connection dropped."""
        return self.run / "ssh" / f"{agent_id}.log"

    @property
    def clients_file(self) -> Path:
        """How many clients are attached now, for `hive-office ls`."""
        return self.run / "clients.json"

    def desk_tmp(self, agent_id: str) -> Path:
        """A contained desk's private temporary folder (its TMPDIR; desks/contain.py)."""
        return self.run / "tmp" / agent_id

    @property
    def threads(self) -> Path:
        """The router's record of each message's hops and thread: one HopRecord line per
        message in `<day>.jsonl` (the day its id starts with)."""
        return self.run / "threads"

    @property
    def agent_settings(self) -> Path:
        return self.home / "agent-settings"

    def settings_file(self, agent_id: str, suffix: str = ".json") -> Path:
        """A file the office writes for one agent's CLI (Claude's settings, its MCP
        config: `.mcp.json`); agents never write here (events/policy.py)."""
        return self.agent_settings / f"{agent_id}{suffix}"

    def provider_home(self, provider: str, agent_id: str) -> Path:
        """A per-agent home the office lays out for a CLI that reads its settings from
        a folder (CODEX_HOME, Gemini's system settings)."""
        return self.agent_settings / provider / agent_id

    @property
    def worktrees(self) -> Path:
        """The agents' git worktrees, one folder each (hive_core/worktrees/)."""
        return self.home / "worktrees"

    def locked(self, hook_program: Path) -> tuple[Path, ...]:
        """What no agent may change, for the CLIs' own deny rules (agents/claude.py), which
        hold even if a hook goes unanswered: the office's files and folders that the hook
        policy locks (events/policy.py `_LOCKED`, the home itself aside) and the hook
        program."""
        return (
            self.office_toml,
            self.run,
            self.agent_settings,
            self.memory_db,
            self.git_dir,
            hook_program,
        )

    def worktree(self, agent_id: str) -> Path:
        return self.worktrees / agent_id

    @property
    def worktree_records(self) -> Path:
        """What the office keeps of the agents' worktrees (the files below)."""
        return self.run / "worktrees"

    def worktree_record(self, agent_id: str) -> Path:
        """An agent's worktree: its path, branch and base (worktrees.WorktreeRecord)."""
        return self.worktree_records / f"{agent_id}.json"

    def worktree_setup_marker(self, agent_id: str) -> Path:
        """Present once `worktree_setup` has run in the agent's worktree."""
        return self.worktree_records / f"{agent_id}.setup.json"

    @property
    def worktree_overlaps(self) -> Path:
        """The files two agents' branches both touch, as last found."""
        return self.worktree_records / "overlaps.json"

    @property
    def worktree_told(self) -> Path:
        """The overlaps the agents were already warned of."""
        return self.worktree_records / "told.json"

    @property
    def memory_db(self) -> Path:
        return self.home / "memory.db"

    @property
    def ci_logs(self) -> Path:
        """The CI-log cache (hive_core/ci/): the one place its writer, its reader and
        the office's retention sweep find it, whatever their cwd or environment."""
        return self.home / "ci-logs"

    def ci_run(self, owner: str, repo: str, run_id: int, attempt: int) -> CiRun:
        """One attempt of one CI run in the cache: its logs and run.json."""
        return CiRun(self.ci_logs / owner / repo / str(run_id) / str(attempt))

    def ci_summary_of(self, path: str | os.PathLike[str]) -> tuple[str, str, int, int] | None:
        """(owner, repo, run, attempt) if `path` (absolute, or relative to the home) is the
        run.json of an attempt in the CI-log cache: the inverse of `ci_run(...).summary`
        (pure, lexical)."""
        file = Path(os.path.normpath(os.path.join(self.home, path)))
        try:
            owner, repo, run, attempt, _ = file.relative_to(self.ci_logs).parts
        except ValueError:
            return None
        if not (run.isdigit() and attempt.isdigit()):
            return None
        key = (owner, repo, int(run), int(attempt))
        return key if self.ci_run(*key).summary == file else None

    @property
    def memory_lock(self) -> Path:
        """Held while memory.db is opened, checked or rebuilt (memory/store.py)."""
        return self.run / "memory.lock"

    @property
    def tasks_lock(self) -> Path:
        """The ledger's write lock: tasks.json is replaced by rename, so the lock is a
        file of its own, outside git."""
        return self.run / "tasks.lock"

    @property
    def leases_lock(self) -> Path:
        """The leases' write lock (hive_core/team/leases.py), beside the ledger's, for the same
        reason."""
        return self.run / "leases.lock"

    # --- hive level ---
    @property
    def protocol(self) -> Path:
        return self.hive / "PROTOCOL.md"

    @property
    def manager_policy(self) -> Path:
        """The manager's duties and escalation policy, editable by the person."""
        return self.hive / "MANAGER.md"

    @property
    def registry(self) -> Path:
        return self.hive / "registry.json"

    @property
    def board(self) -> Path:
        return self.hive / "board.md"

    @property
    def tasks(self) -> Path:
        return self.hive / "tasks.json"

    @property
    def leases(self) -> Path:
        """Who holds which files of a repository, until when (hive_core/team/leases.py)."""
        return self.hive / "leases.json"

    @property
    def log(self) -> Path:
        """The live log, appended to; rotated into `log_segments` (hive_core/logfile.py)."""
        return self.hive / "log.jsonl"

    @property
    def log_segments(self) -> Path:
        """The log's earlier parts, numbered oldest first: log/0001.jsonl, log/0002.jsonl..."""
        return self.hive / "log"

    @property
    def triage(self) -> Path:
        return self.hive / "triage"

    @property
    def promoted(self) -> Path:
        """Private memory the manager or the person made office knowledge:
        `<entry id>.json` each (memory/sources.py)."""
        return self.hive / "promoted"

    @property
    def gitignore(self) -> Path:
        return self.hive / ".gitignore"

    @property
    def git_dir(self) -> Path:
        """The hive's git metadata: the committer's alone."""
        return self.hive / ".git"

    @property
    def agents_dir(self) -> Path:
        return self.hive / "agents"

    def mailbox(self, who: str) -> Mailbox:
        """The folder of an agent, or of the person (`human`)."""
        root = self.hive / HUMAN if who == HUMAN else self.agents_dir / who
        return Mailbox(root)

    def locate(self, path: str | os.PathLike[str]) -> Place | None:
        """What `path` is in this office and whose (pure: no file is touched, no link
        followed). The inverse of the properties above: a caller that must know whether
        a path is an inbox, a settings file or the board asks here, never re-derives it
        from path parts. `path` is normalised lexically; a relative path is taken
        against the home. None for a path outside the home."""
        # String work, not pathlib: the watcher's sort asks this for every path of a
        # burst, and Path.relative_to is 7x slower.
        # The home normalised too: `--home ../x` gives /cwd/../x, which no normalised
        # path starts with.
        home = os.path.normpath(self.home)
        raw = os.path.normpath(os.path.join(home, path))
        root = home.rstrip("/") + "/"
        if raw == home:
            rel: tuple[str, ...] = ()
        elif raw.startswith(root):
            rel = tuple(raw[len(root) :].split("/"))
        else:
            return None
        if not rel:
            return Place("home", None)
        top, rest = rel[0], rel[1:]
        if top != "hive":
            kind = _HOME_KINDS.get(top, "home_other")
            return Place(kind, None)
        if not rest:
            return Place("hive", None)
        if rest[0] in _HIVE_FILES:
            return Place(_HIVE_FILES[rest[0]], None)
        if rest[0] == HUMAN:
            return Place(_mailbox_kind(rest[1:]), HUMAN)
        if rest[0] == "agents":
            if len(rest) == 1:
                return Place("agents", None)
            return Place(_mailbox_kind(rest[2:]), rest[1])
        return Place("hive_other", None)


# fmt: off
PlaceKind = Literal[
    # home level
    "home", "office_toml", "run", "agent_settings", "memory_db", "ci_logs", "home_other",
    # hive level (shared, the office's or the manager's)
    "hive", "git", "gitignore", "protocol", "manager_policy", "registry", "board",
    "tasks", "leases", "log", "log_segment", "triage", "promoted", "agents", "hive_other",
    # inside a mailbox (owner = the agent, or `human`)
    "mailbox", "identity", "memory", "memory_dir", "notes", "archive", "changes", "cursor",
    "inbox", "done", "outbox", "routing", "sent", "bad", "mailbox_other",
]
# fmt: on


class Place(NamedTuple):
    """What a path is (`kind`) and whose folder holds it (`owner`: an agent id, `human`,
    or None for the office's own files)."""

    kind: PlaceKind
    owner: str | None


_HOME_KINDS: dict[str, PlaceKind] = {
    "office.toml": "office_toml",
    "run": "run",
    "agent-settings": "agent_settings",
    "memory.db": "memory_db",
    "memory.db-wal": "memory_db",
    "memory.db-shm": "memory_db",
    "ci-logs": "ci_logs",
}

_HIVE_FILES: dict[str, PlaceKind] = {
    ".git": "git",
    ".gitignore": "gitignore",
    "PROTOCOL.md": "protocol",
    "MANAGER.md": "manager_policy",
    "registry.json": "registry",
    "board.md": "board",
    "tasks.json": "tasks",
    "leases.json": "leases",
    "log.jsonl": "log",
    "log": "log_segment",
    "triage": "triage",
    "promoted": "promoted",
}


_OUTBOX_KINDS: dict[str, PlaceKind] = {".routing": "routing", ".sent": "sent", ".bad": "bad"}
# Inside a mailbox's memory/ folder; anything else there (the tidy's locks) is memory_dir.
_MEMORY_FILES: dict[str, PlaceKind] = {
    "notes.md": "notes",
    "archive.md": "archive",
    "changes.md": "changes",
}


def _mailbox_kind(rest: tuple[str, ...]) -> PlaceKind:
    """The kind of a path inside a mailbox, from the parts below its root."""
    if not rest:
        return "mailbox"
    head = rest[0]
    if head == "identity.md" and len(rest) == 1:
        return "identity"
    if head == "memory.md" and len(rest) == 1:
        return "memory"
    if head == "memory":
        return _MEMORY_FILES.get(rest[1], "memory_dir") if len(rest) == 2 else "memory_dir"
    if head == "cursor.json" and len(rest) == 1:
        return "cursor"
    if head == "inbox":
        return "done" if len(rest) > 1 and rest[1] == ".done" else "inbox"
    if head == "outbox":
        return _OUTBOX_KINDS.get(rest[1], "outbox") if len(rest) > 1 else "outbox"
    return "mailbox_other"


class CiRun(NamedTuple):
    """One attempt of a CI run in the cache (`<ci-logs>/<owner>/<repo>/<run>/<attempt>/`)."""

    root: Path

    @property
    def summary(self) -> Path:
        """The run's metadata and failed jobs: the memory source its entries come from."""
        return self.root / "run.json"

    @property
    def failed_log(self) -> Path:
        """`gh run view --log-failed`, as fetched."""
        return self.root / "failed.log"

    @property
    def full_log(self) -> Path:
        """`gh run view --log`, as fetched."""
        return self.root / "full.log"

    def files(self) -> tuple[Path, ...]:
        """Every file the cache writes here (the sweep deletes these and nothing else)."""
        return (self.summary, self.failed_log, self.full_log)


class Mailbox(NamedTuple):
    """An agent's (or the person's) own folder in the hive."""

    root: Path

    @property
    def identity(self) -> Path:
        return self.root / "identity.md"

    @property
    def memory(self) -> Path:
        return self.root / "memory.md"

    @property
    def memory_dir(self) -> Path:
        """The agent's private memory files beside memory.md (the person has none)."""
        return self.root / "memory"

    @property
    def notes(self) -> Path:
        """What `hive memory note` appends to; the tidy folds it into memory.md."""
        return self.memory_dir / "notes.md"

    @property
    def archive(self) -> Path:
        """Where the tidy moves what leaves memory.md (still searchable, scope own)."""
        return self.memory_dir / "archive.md"

    @property
    def changes(self) -> Path:
        """The tidy's dated list of every change it made to memory.md, and why."""
        return self.memory_dir / "changes.md"

    @property
    def notes_lock(self) -> Path:
        """A dotfile beside notes.md (never committed, never read as data): notes.md is
        replaced by a rename, and a lock on a replaced inode guards nothing."""
        return self.memory_dir / ".notes.lock"

    @property
    def tidy_lock(self) -> Path:
        """One tidy at a time per agent."""
        return self.memory_dir / ".tidy.lock"

    @property
    def inbox(self) -> Path:
        return self.root / "inbox"

    @property
    def done(self) -> Path:
        return self.root / "inbox" / ".done"

    @property
    def outbox(self) -> Path:
        return self.root / "outbox"

    @property
    def routing(self) -> Path:
        """Claimed by the router, delivery in progress (see router.py)."""
        return self.root / "outbox" / ".routing"

    @property
    def sent(self) -> Path:
        return self.root / "outbox" / ".sent"

    @property
    def bad(self) -> Path:
        return self.root / "outbox" / ".bad"

    @property
    def cursor(self) -> Path:
        return self.root / "cursor.json"

    def dirs(self) -> tuple[Path, ...]:
        return (self.inbox, self.done, self.outbox, self.routing, self.sent, self.bad)

    def message_dirs(self) -> tuple[Path, ...]:
        """Where the mailbox keeps messages it received or sent (not drafts, not claims,
        not quarantined files)."""
        return (self.inbox, self.done, self.sent)
