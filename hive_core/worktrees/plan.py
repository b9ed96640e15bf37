"""Agents' git worktrees, the pure part: who gets one, its branch, and what git's
output says (changed files, hunks, a merge check, the worktree list, overlaps between
agents). hive_core/worktrees/ runs git and hands its output here; the app's Diff
panel reads the same structs.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from hive_core import gitsafe
from hive_core.remote.plan import remote_worktree_relative
from hive_core.remote.ssh import remote_path_word
from hive_core.schema import AgentSpec

# Where git puts `<agent>`: under the office's own namespace, so two offices using one
# repository (same office name or not) never fight over a branch.
BRANCH_PREFIX = "hive"


class WorktreeRecord(msgspec.Struct, kw_only=True):
    """run/worktrees/<agent>.json: what the office made, and from what."""

    agent: str
    repo: str  # the repository's top folder (the person's checkout)
    path: str  # the worktree's folder
    branch: str
    base_branch: str | None  # the branch it was made from; None: HEAD was detached
    base_commit: str  # the commit it was made from
    subdir: str = ""  # where in the repository the agent's cwd was ("" = the top)
    created: str = ""
    # A remote desk's: the host repo and path are on, and how to reach it (kept up to
    # date from office.toml at each start, so a diff or merge needs only the record).
    host: str | None = None
    ssh_args: list[str] = []


class SetupMarker(msgspec.Struct, kw_only=True):
    """run/worktrees/<agent>.setup.json: worktree_setup ran (once) and how it went."""

    ok: bool
    detail: str
    ts: str


class FileStat(msgspec.Struct, frozen=True):
    path: str
    added: int  # 0 for a binary file
    deleted: int
    binary: bool = False
    untracked: bool = False


class Hunk(msgspec.Struct, frozen=True):
    header: str  # the `@@ -a,b +c,d @@ ...` line
    lines: list[str]  # each starts with ' ', '+', '-' or '\\'


class FilePatch(msgspec.Struct, frozen=True):
    path: str
    hunks: list[Hunk]
    binary: bool = False
    untracked: bool = False  # set by the caller, which knows (git's text does not say)


class MergeCheck(msgspec.Struct, frozen=True):
    clean: bool
    tree: str  # the merged tree's id (git merge-tree --write-tree)
    conflicts: list[str]


class Overlap(msgspec.Struct, frozen=True, order=True):
    """Two agents' branches touch one file."""

    path: str
    first: str
    second: str


def wants_worktree(spec: AgentSpec, manager: str) -> bool:
    """Whether the roster asks for a worktree (the repository check comes later): said
    explicitly, or by default for everyone but the manager, who runs the floor from
    the person's checkout."""
    if spec.worktree is not None:
        return spec.worktree
    return spec.id != manager


def office_slug(office_name: str, home: str) -> str:
    """The office's part of a branch name: its name made ref-safe, and a short id of its
    home so two offices with one name differ."""
    name = re.sub(r"[^a-z0-9]+", "-", office_name.lower()).strip("-")[:24] or "office"
    return f"{name}-{hashlib.sha1(home.encode()).hexdigest()[:6]}"


def branch_name(office_name: str, home: str, agent_id: str) -> str:
    return f"{BRANCH_PREFIX}/{office_slug(office_name, home)}/{agent_id}"


def parse_numstat(out: bytes) -> list[FileStat]:
    """`git diff --numstat -z --no-renames` output: `added\\tdeleted\\tpath\\0` each;
    `-\\t-\\t` for a binary file."""
    stats: list[FileStat] = []
    for record in out.split(b"\0"):
        if not record:
            continue
        added, deleted, path = record.split(b"\t", 2)
        name = path.decode("utf-8", "surrogateescape")
        if added == b"-":
            stats.append(FileStat(name, 0, 0, binary=True))
        else:
            stats.append(FileStat(name, int(added), int(deleted)))
    return stats


# How much of an untracked file is looked at to count its lines.
UNTRACKED_READ_MAX = 8 << 20


def untracked_stat(path: str, head: bytes) -> FileStat:
    """An untracked file counted as new, from its first UNTRACKED_READ_MAX bytes (a NUL
    in them makes it binary, as git decides)."""
    if b"\0" in head[:8000]:
        return FileStat(path, 0, 0, binary=True, untracked=True)
    lines = head.count(b"\n") + (1 if head and not head.endswith(b"\n") else 0)
    return FileStat(path, lines, 0, untracked=True)


# git's modes for a new file in a diff header.
MODE_FILE, MODE_EXECUTABLE, MODE_LINK = "100644", "100755", "120000"
# What git reads to decide a file is binary (a NUL in it).
BINARY_PROBE = 8000


def _c_quoted(name: str) -> str:
    """A path as git writes it in a diff header with core.quotepath off: in double
    quotes with C escapes when it holds a control character, a quote or a backslash."""
    if not any(ord(c) < 0x20 or c in '"\\\x7f' for c in name):
        return name
    named = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r"}
    out = []
    for c in name:
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif c in named:
            out.append("\\" + named[c])
        elif ord(c) < 0x20 or c == "\x7f":
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def new_file_patch(path: str, data: bytes, mode: str, *, whole: bool = True) -> str:
    """What `git diff --no-index /dev/null PATH` shows for a new file holding `data` (a
    symlink's: its target). `whole` False: `data` is only the file's start, shown as
    binary (a count from a part would be wrong)."""
    oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]
    a, b = _c_quoted(f"a/{path}"), _c_quoted(f"b/{path}")
    head = f"diff --git {a} {b}\nnew file mode {mode}\nindex 0000000..{oid}\n"
    if not data:
        return head
    if not whole or b"\0" in data[:BINARY_PROBE]:
        return head + f"Binary files /dev/null and {b} differ\n"
    lines = data.split(b"\n")
    ended = data.endswith(b"\n")
    if ended:
        lines.pop()
    count = "" if len(lines) == 1 else f",{len(lines)}"
    body = "".join("+" + line.decode("utf-8", "replace") + "\n" for line in lines)
    tail = "" if ended else "\\ No newline at end of file\n"
    return head + f"--- /dev/null\n+++ {b}\n@@ -0,0 +1{count} @@\n" + body + tail


_DIFF_GIT = re.compile(r"^diff --git a/(.*) b/(.*)$")


def parse_patch(text: str) -> list[FilePatch]:
    """A unified diff (`git diff`, any number of files) as files of hunks. The path is
    the new side's (the old one for a deletion)."""
    files: list[FilePatch] = []
    path: str | None = None
    hunks: list[Hunk] = []
    lines: list[str] = []
    header: str | None = None
    binary = False

    def close_hunk() -> None:
        nonlocal header, lines
        if header is not None:
            hunks.append(Hunk(header, lines))
        header, lines = None, []

    def close_file() -> None:
        nonlocal path, hunks, binary
        close_hunk()
        if path is not None:
            files.append(FilePatch(path, hunks, binary))
        path, hunks, binary = None, [], False

    for line in text.splitlines():
        if line.startswith("diff --git "):
            close_file()
            match = _DIFF_GIT.match(line)
            path = match.group(2) if match else line[len("diff --git ") :]
        elif header is None and line.startswith("+++ "):
            if line[4:] != "/dev/null":
                path = line[6:] if line.startswith("+++ b/") else line[4:]
        elif header is None and line.startswith("--- "):
            continue
        elif header is None and line.startswith("Binary files "):
            binary = True
        elif line.startswith("@@"):
            close_hunk()
            header = line
        elif header is not None and line[:1] in (" ", "+", "-", "\\", ""):
            lines.append(line)
    close_file()
    return files


def stat_of(patch: FilePatch) -> FileStat:
    """A file's +/- counts from its hunks (as `git diff --numstat` counts them)."""
    added = sum(1 for h in patch.hunks for line in h.lines if line[:1] == "+")
    deleted = sum(1 for h in patch.hunks for line in h.lines if line[:1] == "-")
    return FileStat(patch.path, added, deleted, binary=patch.binary, untracked=patch.untracked)


def parse_merge_tree(out: bytes, returncode: int) -> MergeCheck:
    """`git merge-tree --write-tree --name-only --no-messages A B`: exit 0 and the tree
    when clean; exit 1, the tree, then one conflicted file a line. Anything else is
    git failing, which the caller reports."""
    if returncode not in (0, 1):
        raise ValueError(f"git merge-tree exited {returncode}")
    text = out.decode("utf-8", "surrogateescape")
    first, _, rest = text.partition("\n")
    conflicts = [] if returncode == 0 else sorted({p for p in rest.split("\n") if p})
    return MergeCheck(returncode == 0, first.strip(), conflicts)


def parse_worktree_list(out: bytes) -> dict[str, str]:
    """`git worktree list --porcelain -z`: branch name -> the folder it is checked out in."""
    where: dict[str, str] = {}
    folder: str | None = None
    for field in out.decode("utf-8", "surrogateescape").split("\0"):
        if field.startswith("worktree "):
            folder = field[len("worktree ") :]
        elif field.startswith("branch refs/heads/") and folder is not None:
            where[field[len("branch refs/heads/") :]] = folder
    return where


def overlaps(changes: Mapping[str, Iterable[str]]) -> list[Overlap]:
    """Every file two agents' branches both touch, once per pair (names in order)."""
    holders: dict[str, list[str]] = {}
    for agent_id in sorted(changes):
        for path in set(changes[agent_id]):
            holders.setdefault(path, []).append(agent_id)
    found = [
        Overlap(path, a, b)
        for path, agents in holders.items()
        for i, a in enumerate(agents)
        for b in agents[i + 1 :]
    ]
    return sorted(found)


def overlap_text(first: str, second: str, files: list[str], reader: str) -> tuple[str, str]:
    """The subject and body of the one warning `reader` gets about the files the
    branches of `first` and `second` both touch."""
    named = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    one = files[0] if len(files) == 1 else f"{len(files)} files"
    if reader in (first, second):
        other = second if reader == first else first
        subject = f"{other} is also changing {one}"
        body = (
            f"Your branch and {other}'s both change {named}. Agree with {other} (or the "
            "manager) who changes what before you go on, or the merge will conflict."
        )
    else:
        subject = f"{first} and {second} both change {one}"
        body = (
            f"The branches of {first} and {second} both change {named}; each of them has "
            "been told. Decide who owns what before they merge (`hive-office diff AGENT` "
            "shows each one's changes)."
        )
    return subject, body


# --- a remote desk's git: the command strings ssh hands its host's shell ---------------

# Variables that would point git at another repository than the folder's own.
GIT_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")
# The remote command's own exit when its folder is missing (git never exits 97; ssh's
# own failure is 255).
NO_FOLDER_EXIT = 97


def _remote_cd(cwd: str) -> str:
    return f"cd {remote_path_word(cwd)} || exit {NO_FOLDER_EXIT}; unset {' '.join(GIT_VARS)}; "


def remote_git_script(cwd: str, args: Sequence[str]) -> str:
    """One git command in `cwd` on the host (`~/` expanded there), hardened as the
    office's own git is (hive_core/gitsafe.py)."""
    return _remote_cd(cwd) + gitsafe.shell_prelude() + "exec " + gitsafe.shell_words(args)


def remote_new_files_script(cwd: str, names: Sequence[str]) -> str:
    """git's patch of each untracked file in `cwd` on the host, in one connection: only
    a symlink or a regular file is given to `git diff --no-index` (which reads a FIFO,
    from git 2.42 on, and would wait for a writer); git's exit 1 (a difference) is its
    success here, any other ends the script with that exit."""
    steps = []
    for name in names:
        word = shlex.quote(name)
        diff = ["diff", *gitsafe.DIFF_FLAGS, "--no-color", "--no-index", "--", "/dev/null", name]
        steps.append(
            f"if [ -h {word} ] || [ -f {word} ]; then {gitsafe.shell_words(diff)}; c=$?; "
            "case $c in 0|1) ;; *) exit $c;; esac; fi"
        )
    return _remote_cd(cwd) + gitsafe.shell_prelude() + "; ".join(steps)


def remote_setup_script(cwd: str, setup: str, env: Mapping[str, str]) -> str:
    """office.worktree_setup run in the worktree on the host with `env` added."""
    words = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    return f"{_remote_cd(cwd)}exec env {words} /bin/sh -c {shlex.quote(setup)} </dev/null"


def remote_home_script(key: str) -> str:
    """Make the office's worktrees folder on the host (private, as prepare makes the
    desks' own) and print $HOME (a worktree's path is kept absolute)."""
    parent = remote_worktree_relative(key, "").rstrip("/")
    return f'umask 077 && mkdir -p "$HOME"/{shlex.quote(parent)} && printf \'%s\\n\' "$HOME"'


def parse_top_prefix(out: bytes) -> tuple[str, str]:
    """`git rev-parse --show-toplevel --show-prefix`: the repository's top, and where the
    folder is in it ("" at the top)."""
    lines = out.decode("utf-8", "surrogateescape").split("\n")
    top = lines[0].strip()
    prefix = lines[1].strip().rstrip("/") if len(lines) > 1 else ""
    if not top.startswith("/"):
        raise ValueError(f"git rev-parse gave no top folder: {out[:200]!r}")
    return top, prefix


def unreachable_text(host: str, reason: str) -> str:
    """Why a remote desk's worktree cannot be read now."""
    return f"cannot reach {host}: {reason.rstrip('.')}; the office retries when the desk reconnects"
