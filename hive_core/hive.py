"""Creating and laying out an office's home and hive (`hive-office init`).

Everything here is idempotent and never overwrites a file that exists: re-running
init after the user or the agents wrote things is always safe.
"""

from __future__ import annotations

import importlib.resources
import os
import stat
from pathlib import Path

import msgspec

from hive_core.config import DEFAULT_OFFICE_TOML, load_office
from hive_core.fsio import atomic_write, ensure_dir
from hive_core.paths import HivePaths, Mailbox
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


def ensure_mailbox(paths: HivePaths, who: str) -> list[tuple[Path, Path]]:
    """Make every folder of a mailbox a real folder. The folders are the office's: what
    an agent put in place of one (a file, a symlink) is moved aside, kept, and returned
    as (folder, where it went) so its owner can be told."""
    box = paths.mailbox(who)
    box.root.parent.mkdir(parents=True, exist_ok=True)
    moved = [
        (folder, aside)
        for folder in mailbox_folders(box, memory=who != HUMAN)
        if (aside := ensure_dir(folder)) is not None
    ]
    if who != HUMAN:
        write_if_missing(box.memory, f"# Memory of {who}\n\n".encode())
        write_if_missing(box.notes, b"")
    # Empty folders vanish from git; a keep-file would be committed noise, so the office
    # recreates them on start instead (this function).
    return moved


def mailbox_folders(box: Mailbox, *, memory: bool = False) -> list[Path]:
    """The folders of a mailbox, each after the folder that holds it."""
    return [box.root, *box.dirs(), *([box.memory_dir] if memory else [])]


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
            entry.pid = old.pid
            if not spec.archived:  # the explained state (hive_core/status.py)
                entry.state, entry.why, entry.evidence = old.state, old.why, old.evidence
        entries.append(entry)
    return Registry(office=config.office.name, manager=config.office.manager, agents=entries)


# registry.json holds one short entry per agent; anything near this is not the office's.
REGISTRY_FILE_MAX = 1 << 20


def read_registry(paths: HivePaths) -> Registry | None:
    """The published registry, or None if there is none the office can use: missing, not
    a regular file (a symlink is not followed), oversize, malformed or nested too deep."""
    try:
        fd = os.open(paths.registry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > REGISTRY_FILE_MAX:
            return None
        data = os.read(fd, REGISTRY_FILE_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return msgspec.json.decode(data, type=Registry)
    except (msgspec.DecodeError, RecursionError):
        return None


def write_registry(paths: HivePaths, registry: Registry) -> None:
    atomic_write(paths.registry, msgspec.json.format(msgspec.json.encode(registry)) + b"\n")


def _private_at(name: str, dir_fd: int | None, *, folder: bool, follow: bool = False) -> bool:
    """Take group and other bits off one file or folder (the owner's bits, execute
    among them, stay). Opened without following a symlink, so a link planted in the
    hive never changes a file outside it. True if its mode changed."""
    try:
        # One stat for the common case, a private file: nothing to open.
        if not os.stat(name, dir_fd=dir_fd, follow_symlinks=follow).st_mode & 0o077:
            return False
    except OSError:
        return False
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_DIRECTORY if folder else 0)
    try:
        fd = os.open(name, flags | (0 if follow else os.O_NOFOLLOW), dir_fd=dir_fd)
    except OSError:
        return False  # a symlink, a socket, gone, or not ours to open
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if not mode & 0o077:
            return False
        os.fchmod(fd, mode & 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def tighten_modes(paths: HivePaths) -> int:
    """Make what the office keeps in its home readable by its user only: the home folder,
    office.toml, memory.db, and everything under hive/, run/ and agent-settings/.
    Nothing else in the home (an agent's working folder may be there) is touched.
    Returns how many files and folders changed."""
    changed = int(_private_at(str(paths.home), None, folder=True, follow=True))
    try:
        home_fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return changed
    try:
        db = paths.memory_db.name
        for name in (paths.office_toml.name, db, f"{db}-wal", f"{db}-shm"):
            changed += _private_at(name, home_fd, folder=False)
        for tree in (paths.hive, paths.run, paths.agent_settings):
            changed += _private_at(tree.name, home_fd, folder=True)
            # fwalk opens each folder relative to its parent's fd: no symlink is followed,
            # not even one swapped in while the walk runs.
            walk = os.fwalk(tree.name, dir_fd=home_fd, follow_symlinks=False)
            try:
                for _dir, folders, files, dir_fd in walk:
                    changed += sum(_private_at(f, dir_fd, folder=True) for f in folders)
                    changed += sum(_private_at(f, dir_fd, folder=False) for f in files)
            except (FileNotFoundError, NotADirectoryError):
                continue  # not made yet (agent-settings before the first agent starts)
    finally:
        os.close(home_fd)
    return changed


def init_office(paths: HivePaths) -> list[str]:
    """Create whatever is missing. Returns the paths created, relative to the home.
    The home and everything the office keeps in it are its user's only."""
    created: list[str] = []

    def note(path: Path, made: bool) -> None:
        if made:
            created.append(str(path.relative_to(paths.home)))

    paths.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths.run.mkdir(mode=0o700, exist_ok=True)
    note(paths.office_toml, write_if_missing(paths.office_toml, DEFAULT_OFFICE_TOML.encode()))
    config = load_office(paths.office_toml)

    paths.hive.mkdir(exist_ok=True)
    from hive_core.committer import ensure_repo

    note(paths.git_dir, ensure_repo(paths.hive))
    note(paths.gitignore, write_if_missing(paths.gitignore, GITIGNORE.encode()))
    note(paths.protocol, write_if_missing(paths.protocol, template("PROTOCOL.md").encode()))
    note(
        paths.manager_policy,
        write_if_missing(paths.manager_policy, template("MANAGER.md").encode()),
    )
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
    tighten_modes(paths)
    return created
