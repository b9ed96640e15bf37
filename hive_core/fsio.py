"""Durable file writes: temp file in the same folder, fsync, rename."""

from __future__ import annotations

import ctypes
import os
import secrets
from collections.abc import Callable
from pathlib import Path

TEMP_PREFIX = ".tmp-"


def is_temp_name(name: str) -> bool:
    """Dotfiles (temp files among them) are never routed, committed or read as data."""
    return name.startswith(".")


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write `data` to `path` so a reader sees the old file or the new one, never half."""
    tmp = path.with_name(f"{TEMP_PREFIX}{secrets.token_hex(6)}-{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_line(path: Path, line: bytes) -> None:
    """Append one line with a single O_APPEND write, so concurrent lines never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line if line.endswith(b"\n") else line + b"\n")
    finally:
        os.close(fd)


def read_tail(path: Path, max_bytes: int) -> bytes:
    """The last `max_bytes` of a file (b"" if it is missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            return f.read()
    except FileNotFoundError:
        return b""


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syncfs  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_syncfs = _load_syncfs()


def sync_filesystem(path: Path) -> None:
    """Make everything written so far on `path`'s filesystem durable, in one call.

    One syncfs(2) per batch replaces an fsync per file; where syncfs is missing, sync(2).
    """
    if _syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)
