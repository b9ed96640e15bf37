"""Durable file writes: temp file in the same folder, fsync, rename."""

from __future__ import annotations

import os
import secrets
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


def write_new(path: Path, data: bytes, *, fsync: bool = True) -> bool:
    """Write `path` atomically unless it exists. Returns False if it already existed.

    Built on link(2), which refuses to overwrite: two writers can never both win.
    """
    tmp = path.with_name(f"{TEMP_PREFIX}{secrets.token_hex(6)}-{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def append_line(path: Path, line: bytes) -> None:
    """Append one line with a single O_APPEND write, so concurrent lines never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line if line.endswith(b"\n") else line + b"\n")
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
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
