"""Where every file of an office lives. The only module that knows the layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from hive_core.schema import HUMAN

DEFAULT_HOME = "~/.hive-office"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """--home wins, then HIVE_HOME, then ~/.hive-office."""
    raw = home or os.environ.get("HIVE_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().absolute()


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
    def health_file(self) -> Path:
        """What is wrong with the running office (hive_core/health.py)."""
        return self.run / "health.json"

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
    def threads(self) -> Path:
        """The router's record of each message's hops and thread: one HopRecord line per
        message in `<day>.jsonl` (the day its id starts with)."""
        return self.run / "threads"

    @property
    def agent_settings(self) -> Path:
        return self.home / "agent-settings"

    @property
    def memory_db(self) -> Path:
        return self.home / "memory.db"

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
    def gitignore(self) -> Path:
        return self.hive / ".gitignore"

    @property
    def agents_dir(self) -> Path:
        return self.hive / "agents"

    def mailbox(self, who: str) -> Mailbox:
        """The folder of an agent, or of the person (`human`)."""
        root = self.hive / HUMAN if who == HUMAN else self.agents_dir / who
        return Mailbox(root)


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
    def notes(self) -> Path:
        return self.root / "memory" / "notes.md"

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
