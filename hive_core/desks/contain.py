"""Contained desks (issue 24): a local desk's processes write only the desk's own
folders and read no other agent's private memory, enforced by the kernel (Landlock).

One mechanism for every provider (claude, codex, gemini, shell): the office applies a
Landlock domain to the desk's CLI in the pty child, after fork and before exec, so the
CLI and everything it starts (its tools, its hooks, a `setsid` orphan) inherit it and
can never leave it. The vendors' own sandboxes are not used (docs/containment.md).

Landlock only allows: a rule grants rights on a folder and everything below it, never
"all but". So reading everywhere except other agents' memory is granted folder by
folder: each folder on the way down to a hidden path is entered, and each of its
entries granted on its own, except the hidden one. Listing a folder (READ_DIR) is
granted everywhere: names of files are not their contents, and `ls ~` keeps working.

`plan` is pure: the desk's folders and the listings of the folders that lead to hidden
paths in, the rules out (or why the desk cannot be contained). `desk_folders` derives
the folders from the office's layout; `listings` reads the folders `plan` must enter;
`ruleset` turns a plan into a Landlock ruleset fd in the office, and `enter` is all the
pty child does with it before exec (no allocation-heavy work after fork).

What the rules cannot express (docs/containment.md): a folder's entries created after
the desk started are not readable by it (it fails closed); connecting to a pathname Unix
socket is not a file-system right (the hook and control sockets stay reachable, and the
office checks who connects); the desk's git writes into the repository's shared object
store and its office's branch folder.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import msgspec

from hive_core.agents.gemini import shared_login
from hive_core.paths import HivePaths

# Landlock's syscalls (the same numbers on every architecture since they were added).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File-system access rights (include/uapi/linux/landlock.h), with the ABI that added them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link or rename across folders
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
# Rights a rule on a file (not a folder) may carry.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_ABI_RIGHTS = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
# ABI 6: the domain's processes may signal only processes of the same domain (their own
# descendants), never another desk's CLI or the office.
SCOPE_SIGNAL = 1 << 1

# Below ABI 3 a contained process could still truncate any file it may not write (another
# agent's inbox): that is no containment, so the desk is shown uncontained.
MIN_ABI = 3

Access = Literal["list", "read", "write", "device"]


class Grant(msgspec.Struct, frozen=True):
    """One Landlock rule: `access` on `path` and everything below it."""

    path: str
    access: Access


class Entry(msgspec.Struct, frozen=True):
    """A folder's entry as `listings` saw it (symbolic links are left out: a rule on one
    would grant its target, which may be a hidden path)."""

    name: str
    kind: Literal["dir", "file"]


class DeskFolders(msgspec.Struct, frozen=True, kw_only=True):
    """What one desk may and may not reach, as absolute paths with no symbolic links."""

    agent: str
    writable: tuple[str, ...]  # its working folder, its mailbox, its CLI's own folders
    hidden: tuple[str, ...]  # never read: other agents' memory, the hive's git, memory.db
    protected: tuple[str, ...]  # never written, even through a shared folder below
    shared_tmp: tuple[str, ...] = ("/tmp", "/var/tmp", "/dev/shm")
    devices: str = "/dev"


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    grants: tuple[Grant, ...] = ()
    refused: str | None = None  # why this desk cannot be contained


def _within(path: str, folder: str) -> bool:
    """`path` is `folder` or below it (lexical: both are real paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def to_list(hidden: Iterable[str]) -> list[str]:
    """The folders `plan` must enter to leave `hidden` out: every strict ancestor of a
    hidden path, root first."""
    folders: set[str] = set()
    for path in hidden:
        parent = os.path.dirname(path)
        # A folder already listed came with all of its own ancestors (50 desks' hidden
        # paths share most of theirs: the home, the hive, the mailboxes' folder).
        while parent not in folders:
            folders.add(parent)
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    return sorted(folders, key=lambda p: (p.count("/"), p))


def plan(folders: DeskFolders, listings: Mapping[str, tuple[Entry, ...]]) -> Plan:
    """The rules that contain the desk: read (and run) everything but `hidden`, list
    every folder, write `writable` and the shared temporary folders that hold nothing
    protected or hidden, use the terminal and the other devices."""
    fenced = (*folders.hidden, *folders.protected)
    for mine in folders.writable:
        inside = next((p for p in fenced if _within(p, mine)), None)
        if inside is not None:
            return Plan(
                refused=f"its folder {mine} holds {inside}, which it may not write; "
                "give it a working folder of its own (cwd in office.toml)"
            )
    grants: list[Grant] = [Grant("/", "list")]

    def read(path: str, kind: str) -> None:
        if path in folders.hidden:
            return
        if kind == "file" or not any(_within(h, path) for h in folders.hidden):
            grants.append(Grant(path, "read"))
            return
        # A folder above a hidden path: its entries one by one. A folder not listed
        # (gone, unreadable) grants nothing below it.
        for entry in listings.get(path, ()):
            read(os.path.join(path, entry.name), entry.kind)

    read("/", "dir")
    grants.append(Grant(folders.devices, "device"))
    grants.extend(
        Grant(tmp, "write")
        for tmp in folders.shared_tmp
        if not any(_within(p, tmp) for p in fenced)
    )
    grants.extend(Grant(path, "write") for path in folders.writable)
    return Plan(grants=tuple(grants))


# --- the desk's folders from the office's layout -----------------------------------------

# What each CLI writes outside the desk's working folder, relative to $HOME when not
# absolute (its sessions, settings, caches), besides the folders the office made for it
# (paths.provider_home) and a $CLAUDE_CONFIG_DIR / $CODEX_HOME / $GEMINI_CLI_HOME given.
CLI_FOLDERS: Mapping[str, tuple[str, ...]] = {
    "claude": (".claude", ".local/state/claude"),
    "codex": (".codex",),
    "gemini": (".gemini",),
    "shell": (),
}
# Every desk's tools share these per-user caches (npm, pip, uv): nothing private there.
SHARED_CACHES = (".cache", ".npm")
# Environment variables that name a CLI's own folder (it writes there).
CONFIG_ENV = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME")


# What a CLI is told when the office contains it: its own sandbox off. Codex's Linux
# sandbox is bubblewrap, which needs a mount namespace, and Landlock refuses a domain's
# processes any mount (`unshare -m` fails inside one): every command the model ran would
# fail. The office's domain is the sandbox instead (docs/containment.md).
CONTAINED_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "codex": ("-c", 'sandbox_mode="danger-full-access"'),
}


def contained_argv(provider: str, argv: list[str]) -> list[str]:
    """The CLI's command line when it runs contained: CONTAINED_OPTIONS right after the
    program, before anything the roster's `command` adds (which may still override)."""
    return [argv[0], *CONTAINED_OPTIONS.get(provider, ()), *argv[1:]]


def cli_problem(provider: str, env: Mapping[str, str]) -> str | None:
    """Why this CLI cannot work contained (None: it can). Claude Code without
    CLAUDE_CONFIG_DIR keeps its settings (the login's onboarding, each folder's trust
    answer) in ~/.claude.json and saves them by a rename in the home folder, which a
    contained desk may not write: the saves would fail unseen, and the desks waiting for
    the first desk's trust answer would wait for ever (agents/login.py). A config dir
    holding `.config.json` is where it keeps them instead."""
    if provider != "claude" or env.get("CLAUDE_CONFIG_DIR"):
        return None
    home = env.get("HOME") or os.path.expanduser("~")
    if os.path.exists(os.path.join(home, ".claude", ".config.json")):
        return None
    return (
        "Claude Code saves ~/.claude.json by a rename in your home folder, which a "
        "contained desk may not write; give the desk CLAUDE_CONFIG_DIR (its env in "
        "office.toml) to contain it"
    )


class _RealPaths:
    """os.path.realpath (not strict) of many paths read at one moment, each folder on
    the way resolved once. A desk's folders are ~200 paths below the same few (the home,
    the hive, the mailboxes, the other desks' cwd), and at 50 desks resolving each path
    whole (an lstat per component, in Python) was most of the office's CPU while it
    started its desks, beside the app drawing its first frame. A path whose parent
    resolved with no symbolic link on the way is that real parent and its own name, if
    that name is no link either (or is missing: realpath keeps it as it is); anything
    else (a link on the way, `.` or `..`, a relative path, a trailing slash) gets
    realpath's own answer for the whole path."""

    def __init__(self) -> None:
        # Paths as asked, and the real paths themselves, that resolved with no link.
        self._plain: dict[str, str] = {"/": "/"}

    def __call__(self, path: str | os.PathLike[str]) -> str:
        path = os.path.expanduser(os.fspath(path))
        return self._plain_real(path) or os.path.realpath(path)

    def _plain_real(self, path: str) -> str | None:
        """`path`'s real path if no link lies on its way, else None."""
        known = self._plain.get(path)
        if known is not None:
            return known
        parent, name = os.path.split(path)
        if not name or name in (".", "..") or not os.path.isabs(parent):
            return None
        base = self._plain_real(parent)
        if base is None:
            return None
        real = os.path.join(base, name)
        try:
            if stat.S_ISLNK(os.lstat(real).st_mode):
                return None
        except OSError:
            pass
        self._plain[path] = self._plain[real] = real
        return real


def desk_folders(
    paths: HivePaths,
    agent: str,
    provider: str,
    cwd: Path,
    roster: Iterable[str],
    env: Mapping[str, str],
    elsewhere: Iterable[str] = (),
    git: tuple[Path, str | None] | None = None,
) -> DeskFolders:
    """The folders of `agent`'s desk working in `cwd` with `env`: what its processes
    write (its working folder, its mailbox, its private tmp, its CLI's folders), what
    they never read (the other agents' private memory, and the two places that hold a
    copy of it: the hive's git and memory.db), and what they never write (the office's
    home, the other agents' worktrees and the other desks' working folders `elsewhere`,
    unless one is inside this desk's own). `git`: the roster's folder and the desk's
    branch when `cwd` is its worktree of that folder's repository."""
    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    real = _RealPaths()
    # A desk started in a subfolder of its worktree (the roster's cwd was one of the
    # repository) works in the whole worktree.
    worktree = paths.worktree(agent)
    if _within(real(cwd), real(worktree)):
        cwd = worktree
    mine = [str(cwd), str(paths.mailbox(agent).root), str(paths.desk_tmp(agent))]
    for name in CONFIG_ENV:
        if env.get(name):
            mine.append(env[name])
    mine.append(str(paths.provider_home(provider, agent)))
    if provider == "gemini":
        # The one sign-in every gemini desk of the office reads and refreshes (each
        # desk's login file is a link to it): a sign-in made in one pane is written there.
        mine.append(str(shared_login(paths).parent))
    mine += [os.path.join(home, p) for p in (*CLI_FOLDERS.get(provider, ()), *SHARED_CACHES)]
    if git is not None:
        mine += _git_folders(cwd, *git)
    hidden = [str(paths.git_dir), *(str(p) for p in _db_files(paths))]
    others = sorted(set(roster) - {agent})
    for other in others:
        box = paths.mailbox(other)
        hidden += [str(box.memory_dir), str(box.memory)]
    own = real(cwd)
    protected = [str(paths.home), *(str(paths.worktree(o)) for o in others)]
    protected += [p for p in map(real, elsewhere) if not _within(p, own)]
    return DeskFolders(
        agent=agent,
        writable=tuple(dict.fromkeys(real(p) for p in mine)),
        hidden=tuple(dict.fromkeys(real(p) for p in hidden)),
        protected=tuple(dict.fromkeys(real(p) for p in protected)),
    )


def _db_files(paths: HivePaths) -> list[Path]:
    db = paths.memory_db
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


def _repository_git_dir(folder: Path) -> Path | None:
    """The .git folder of the repository holding `folder` (None: none, or `folder` is in
    a linked worktree, whose .git is a file)."""
    for place in (folder, *folder.parents):
        dot_git = place / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.exists():
            return None
    return None


def _git_folders(cwd: Path, repository: Path | None, branch: str | None) -> list[str]:
    """What git in the desk's linked worktree `cwd` of `repository` (the roster's folder,
    the person's) writes outside it: its own folder in the repository's .git/worktrees,
    the shared object store, and the folder of the desk's branch `branch` with its reflog
    (shared with the other desks' branches of the same office). Both the worktree's .git
    file and its HEAD are the agent's to write, so neither decides a grant: the .git
    file must name a folder of that repository's .git/worktrees, and the branch is the
    office's name for it. Nothing for a folder that is not such a worktree."""
    common = None if repository is None else _repository_git_dir(repository)
    try:
        text = (cwd / ".git").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if common is None or not text.startswith("gitdir:"):
        return []
    common_real = os.path.realpath(common)
    own = os.path.realpath(os.path.join(cwd, text.removeprefix("gitdir:").strip()))
    if os.path.dirname(own) != os.path.join(common_real, "worktrees"):
        return []
    folders = [own, os.path.join(common_real, "objects")]
    if branch is not None:
        ref_dir = os.path.dirname(os.path.join("refs", "heads", branch))
        folders += [os.path.join(common_real, ref_dir), os.path.join(common_real, "logs", ref_dir)]
    return folders


def listings(folders: Iterable[str]) -> dict[str, tuple[Entry, ...]]:
    """Each folder's folders and regular files (no symbolic links, sockets, FIFOs);
    a folder that cannot be listed is left out, so nothing below it is granted."""
    seen: dict[str, tuple[Entry, ...]] = {}
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                entries = []
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        entries.append(Entry(e.name, "dir"))
                    elif e.is_file(follow_symlinks=False):
                        entries.append(Entry(e.name, "file"))
        except OSError:
            continue
        seen[folder] = tuple(sorted(entries, key=lambda e: e.name))
    return seen


# --- the kernel's side ------------------------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version (0: none, or disabled at boot)."""
    version = _LIBC.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def unavailable(version: int) -> str | None:
    """Why a kernel with this Landlock ABI cannot contain a desk (None: it can)."""
    if version == 0:
        return "this kernel has no Landlock (Linux 5.13 or later, with landlock in its lsm= list)"
    if version < MIN_ABI:
        return (
            f"this kernel's Landlock (ABI {version}) cannot stop a desk truncating others' "
            f"files; Linux 6.2 or later (ABI {MIN_ABI}) contains desks"
        )
    return None


def handled(version: int) -> int:
    return sum(bits for since, bits in _ABI_RIGHTS.items() if since <= version)


def rights(access: Access, is_dir: bool, version: int) -> int:
    """The Landlock rights a grant gives on a folder or a file, for this ABI."""
    every = handled(version)
    mask = {
        "list": READ_DIR,
        "read": EXECUTE | READ_FILE | READ_DIR,
        "write": every,
        "device": READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV | READ_DIR,
    }[access] & every
    return mask if is_dir else mask & FILE_RIGHTS


def _fail(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def ruleset(grants: Iterable[Grant], version: int) -> int:
    """A Landlock ruleset fd (close-on-exec) holding `grants`; paths that do not exist
    or are symbolic links are skipped (nothing is granted through a link)."""
    attr = _RulesetAttr(handled(version), 0, SCOPE_SIGNAL if version >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else 16
    fd = _LIBC.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for grant in grants:
            try:
                target = os.open(grant.path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                mode = os.fstat(target).st_mode
                if stat.S_ISLNK(mode):
                    continue
                rule = _PathBeneath(rights(grant.access, stat.S_ISDIR(mode), version), target)
                if _LIBC.syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    raise _fail(f"landlock_add_rule({grant.path})")
            finally:
                os.close(target)
    except BaseException:
        os.close(fd)
        raise
    return int(fd)


def enter(fd: int) -> None:
    """In the pty child before exec: take on the ruleset for good. no_new_privs is what
    Landlock asks of an unprivileged process (a set-uid program such as sudo then runs
    without its privileges)."""
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if _LIBC.syscall(_RESTRICT_SELF, fd, 0):
        raise _fail("landlock_restrict_self")
    os.close(fd)
