"""Durable file writes (temp file in the same folder, fsync, rename), reads that never
follow a symlink, and folders that are kept folders."""

from __future__ import annotations

import errno
import functools
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from hive_core.errors import OfficeError

TEMP_PREFIX = ".tmp-"
# Hive files are the office user's alone (messages, memory, the log).
FILE_MODE = 0o600
# Files the office writes for agents' CLIs and no agent needs to change (their settings):
# replaced whole by atomic_write (a rename needs only the folder writable).
READ_ONLY_MODE = 0o400
# Errors that mean "no room": the write may succeed later, nothing about the file is wrong.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


class UnsafeFile(OfficeError):
    """A file that is not read: a symlink, not a regular file, or too large. The message
    is a sentence saying which."""


def read_regular(path: Path, max_bytes: int, *, follow: bool = False) -> bytes:
    """The bytes of a regular file, never through a symlink at its last component (unless
    `follow`), never blocking on a FIFO, never more than `max_bytes`. FileNotFoundError
    if it is missing."""
    return read_regular_stat(path, max_bytes, follow=follow)[0]


def open_regular(path: Path | str, *, follow: bool = False) -> int:
    """A read-only descriptor of a regular file that an agent may have named: never
    through a symlink at its last component (unless `follow`: a person's own dotfile may
    be one), never waiting on a FIFO or device (opened non-blocking, then checked).
    UnsafeFile otherwise; FileNotFoundError if missing."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFile("it is a symbolic link; the office never follows one.") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFile("it is not a regular file.")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_head(path: Path | str, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The first `max_bytes` of a regular file (open_regular's rules) and its status: a
    larger file is cut, not refused."""
    fd = open_regular(path)
    try:
        st = os.fstat(fd)
        chunks = []
        left = max_bytes
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks), st


def read_regular_stat(
    path: Path, max_bytes: int, *, follow: bool = False
) -> tuple[bytes, os.stat_result]:
    """read_regular, with the status of the very file that was read (its descriptor's)."""
    fd = open_regular(path, follow=follow)
    try:
        st = os.fstat(fd)
        if st.st_size > max_bytes:
            raise UnsafeFile(f"it is {st.st_size} bytes, over the limit of {max_bytes}.")
        chunks = []
        left = max_bytes + 1
        # Asking for one byte more than the file holds: a short read is its end, so a
        # small file takes one read, not a second one to find the end.
        want = st.st_size + 1
        while left > 0 and (chunk := os.read(fd, min(left, want))):
            chunks.append(chunk)
            left -= len(chunk)
            if len(chunk) < want:
                break
            want = 1 << 20
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise UnsafeFile(f"it is over the limit of {max_bytes} bytes.")
    return data, st


def ensure_dir(path: Path) -> Path | None:
    """Make `path` a real folder the office can write. Whatever stands in its place (a
    file, a symlink, anything but a folder) is renamed aside, never followed or deleted,
    and the new name returned; None if nothing had to move."""
    moved: Path | None = None
    for _ in range(3):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                os.mkdir(path, 0o700)
                return moved
            except FileExistsError:
                continue  # someone made it meanwhile: look again
        if stat.S_ISDIR(st.st_mode):
            if st.st_mode & 0o700 != 0o700:
                os.chmod(path, stat.S_IMODE(st.st_mode) | 0o700, follow_symlinks=False)
            return moved
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        aside = path.with_name(f"{path.name}.moved-{stamp}-{os.urandom(3).hex()}")
        os.rename(path, aside)
        moved = aside
    raise FileExistsError(errno.EEXIST, "kept being replaced while it was repaired", str(path))


def write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (a nearly full disk); finish or raise."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def is_temp_name(name: str) -> bool:
    """Dotfiles (temp files among them) are never routed, committed or read as data."""
    return name.startswith(".")


def atomic_write(path: Path, data: bytes, *, fsync: bool = True, mode: int = FILE_MODE) -> None:
    """Write `data` to `path` so a reader sees the old file or the new one, never half."""
    tmp = path.with_name(f"{TEMP_PREFIX}{os.urandom(6).hex()}-{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_line(path: Path, line: bytes) -> None:
    """Append one line with a single O_APPEND write, so concurrent lines never interleave.
    A line a full disk cut short is ended first, so it never swallows this one. OSError
    for a symlink or anything but a regular file in its place (never followed, never a
    FIFO's write that waits for a reader)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file; nothing was written", str(path))
        data = line if line.endswith(b"\n") else line + b"\n"
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        write_all(fd, data)
    finally:
        os.close(fd)


def read_tail(path: Path, max_bytes: int) -> bytes:
    """The last `max_bytes` of a file (b"" if it is missing or not a regular file)."""
    try:
        fd = open_regular(path)
    except (FileNotFoundError, UnsafeFile):
        return b""
    with os.fdopen(fd, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        return f.read()


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    # Loaded on first use, not at import: every `hive` command imports this module and
    # only the committer syncs.
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syncfs  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def sync_filesystem(path: Path) -> None:
    """Make everything written so far on `path`'s filesystem durable, in one call.

    One syncfs(2) per batch replaces an fsync per file; where syncfs is missing, sync(2).
    """
    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)
