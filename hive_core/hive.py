"""Creating and laying out an office's home and hive (`hive-office init`).

Everything here is idempotent and never overwrites a file that exists: re-running
init after the user or the agents wrote things is always safe.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import msgspec

from hive_core.config import DEFAULT_OFFICE_TOML, load_office
from hive_core.fsio import atomic_write
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Ledger, OfficeConfig, Registry, RegistryEntry

GITIGNORE = """\
# Written by hive-office. Everything else in the hive is history and is committed.
# Temp files of atomic writes and claims in progress:
.tmp-*
*.tmp
**/outbox/.routing/
# Never versioned: sockets, secrets, caches.
*.sock
*.secret
__pycache__/
*.db
*.db-*
"""

BOARD = """\
# Board

The shared plan. The manager keeps it; everyone reads it with `hive board`.
"""


def template(name: str) -> str:
    return (importlib.resources.files("hive_core") / "templates" / name).read_text(encoding="utf-8")


def write_if_missing(path: Path, data: bytes) -> bool:
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return True


def ensure_mailbox(paths: HivePaths, who: str) -> None:
    box = paths.mailbox(who)
    for folder in box.dirs():
        folder.mkdir(parents=True, exist_ok=True)
    if who != HUMAN:
        (box.root / "memory").mkdir(exist_ok=True)
        write_if_missing(box.memory, f"# Memory of {who}\n\n".encode())
        write_if_missing(box.notes, b"")
    # Empty folders vanish from git; a keep-file would be committed noise, so the office
    # recreates them on start instead (this function).


def registry_from_roster(config: OfficeConfig, previous: Registry | None = None) -> Registry:
    """The roster as registry entries, keeping live fields (status, session) already known."""
    known = {e.id: e for e in previous.agents} if previous else {}
    entries = []
    for spec in config.agents:
        old = known.get(spec.id)
        entry = RegistryEntry(
            id=spec.id,
            name=spec.name,
            role=spec.role,
            provider=spec.provider,
            manager=spec.id == config.office.manager,
            web=spec.web,
            send_only=spec.send_only,
            status="archived" if spec.archived else (old.status if old else "offline"),
        )
        if old:
            entry.session_id = old.session_id
            entry.last_tool = old.last_tool
            entry.last_seen = old.last_seen
        entries.append(entry)
    return Registry(office=config.office.name, manager=config.office.manager, agents=entries)


def read_registry(paths: HivePaths) -> Registry | None:
    try:
        return msgspec.json.decode(paths.registry.read_bytes(), type=Registry)
    except (FileNotFoundError, msgspec.DecodeError):
        return None


def write_registry(paths: HivePaths, registry: Registry) -> None:
    atomic_write(paths.registry, msgspec.json.format(msgspec.json.encode(registry)) + b"\n")


def init_office(paths: HivePaths) -> list[str]:
    """Create whatever is missing. Returns the paths created, relative to the home."""
    created: list[str] = []

    def note(path: Path, made: bool) -> None:
        if made:
            created.append(str(path.relative_to(paths.home)))

    paths.home.mkdir(parents=True, exist_ok=True)
    paths.run.mkdir(mode=0o700, exist_ok=True)
    paths.run.chmod(0o700)
    note(paths.office_toml, write_if_missing(paths.office_toml, DEFAULT_OFFICE_TOML.encode()))
    config = load_office(paths.office_toml)

    paths.hive.mkdir(exist_ok=True)
    from hive_core.committer import ensure_repo

    note(paths.hive / ".git", ensure_repo(paths.hive))
    note(paths.gitignore, write_if_missing(paths.gitignore, GITIGNORE.encode()))
    note(paths.protocol, write_if_missing(paths.protocol, template("PROTOCOL.md").encode()))
    note(paths.manager_policy, write_if_missing(paths.manager_policy, template("MANAGER.md").encode()))
    note(paths.board, write_if_missing(paths.board, BOARD.encode()))
    note(
        paths.tasks,
        write_if_missing(paths.tasks, msgspec.json.format(msgspec.json.encode(Ledger())) + b"\n"),
    )
    note(paths.log, write_if_missing(paths.log, b""))
    paths.triage.mkdir(exist_ok=True)
    if not paths.registry.exists():
        write_registry(paths, registry_from_roster(config))
        note(paths.registry, True)
    for who in [*(a.id for a in config.agents), HUMAN]:
        existed = paths.mailbox(who).root.exists()
        ensure_mailbox(paths, who)
        note(paths.mailbox(who).root, not existed)
    return created
