"""The office log: a live `log.jsonl` that is appended to, and numbered segments.

git stores a whole new copy of a file each time it changes, so a log that only ever
grows costs its full size per commit. Past LOG_ROTATE_BYTES the live file is renamed
into the next segment, which is committed once and never changes again; appenders
(`fsio.append_line`) create a new live file as they write. Only the office rotates,
from its committer's loop, so one process does it. Readers: `iter_log_lines` for the
recent past, `LogFollower` for what comes next (it notices a rotation).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from hive_core.fsio import UnsafeFile, open_regular
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN

log = logging.getLogger(__name__)

# Bounds what one commit re-stores of the log (about a tenth of this once compressed,
# until gc makes it a delta); segments cost the same in total whatever their size.
LOG_ROTATE_BYTES = 256 << 10
_SEGMENT = re.compile(r"(\d+)\.jsonl")


def segments(paths: HivePaths) -> list[Path]:
    """The rotated segments, oldest first."""
    try:
        names = os.listdir(paths.log_segments)
    except (FileNotFoundError, NotADirectoryError):
        return []
    numbered = sorted((int(m.group(1)), n) for n in names if (m := _SEGMENT.fullmatch(n)))
    return [paths.log_segments / name for _, name in numbered]


def _claims_in_progress(paths: HivePaths) -> bool:
    """True if some outbox holds a claim the router has not finished. Its recovery
    looks for the claim's log line in the live file's tail, so it must still be there."""
    boxes = [paths.mailbox(HUMAN)]
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        boxes += [paths.mailbox(e.name) for e in os.scandir(paths.agents_dir) if e.is_dir()]
    for box in boxes:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            if any(not name.startswith(".") for name in os.listdir(box.routing)):
                return True
    return False


def rotate_if_due(paths: HivePaths, limit: int = LOG_ROTATE_BYTES) -> list[Path]:
    """Move the live log into the next segment if it has reached `limit` and no claim
    is in progress. Returns the paths that changed (for the committer).

    Call it on the loop that routes: the router's appends then never race the rename.
    (A line another thread appends during the rename lands at the end of the segment,
    still in the log, and that segment is committed again once.)"""
    try:
        if paths.log.stat().st_size < limit or _claims_in_progress(paths):
            return []
        paths.log_segments.mkdir(mode=0o700, exist_ok=True)
        existing = segments(paths)
        number = int(existing[-1].stem) + 1 if existing else 1
        segment = paths.log_segments / f"{number:04d}.jsonl"
        if segment.exists():
            raise FileExistsError(f"{segment} exists but is not numbered like a segment")
        os.rename(paths.log, segment)
        # An appender may have created the new live file already; it is never replaced.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        # The log only grows on; the next commit tries again.
        log.warning("log rotation failed: %s", err)
        return []
    return [segment, paths.log]


def _read(path: Path) -> bytes:
    """A log file's bytes; FileNotFoundError for one that is missing or not a regular
    file (an agent can put a FIFO or a symlink in its place: it is never waited on or
    followed)."""
    try:
        fd = open_regular(path)
    except (UnsafeFile, NotADirectoryError):
        raise FileNotFoundError(path) from None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _complete_lines(path: Path) -> list[bytes]:
    try:
        data = _read(path)
    except FileNotFoundError:
        return []
    # The live file may be mid-append: a line without its newline is not an event yet.
    return [line for line in data[: data.rfind(b"\n") + 1].splitlines() if line]


def iter_log_lines(
    paths: HivePaths, tail_n: int = 0, keep: Callable[[bytes], bool] | None = None
) -> Iterator[bytes]:
    """The log's complete lines, oldest first, across segments and the live file: the
    last `tail_n` of those `keep` accepts (all of them if tail_n is 0). Only as many
    segments are read as the tail needs."""
    files = [*segments(paths), paths.log]
    if tail_n <= 0:
        for path in files:
            yield from (line for line in _complete_lines(path) if keep is None or keep(line))
        return
    picked: list[list[bytes]] = []
    found = 0
    for path in reversed(files):
        lines = [line for line in _complete_lines(path) if keep is None or keep(line)]
        picked.append(lines)
        found += len(lines)
        if found >= tail_n:
            break
    newest_last = [line for chunk in reversed(picked) for line in chunk]
    yield from newest_last[-tail_n:]


class LogFollower:
    """What is appended to the log from a point on, across rotations: when the live file
    has been renamed into a segment, the rest of that segment (and of any later one) is
    read first, then the new live file from its start. For `hive log --follow` and the
    app's log panel."""

    def __init__(self, paths: HivePaths, *, from_start: bool = False) -> None:
        """Starts after the last complete line there is now, or at the start of the live
        file (bounded by rotation), for a reader that also shows recent history."""
        self.paths = paths
        self._inode: int | None = None
        self._offset = 0
        with contextlib.suppress(FileNotFoundError), self._open() as f:
            self._inode = os.fstat(f.fileno()).st_ino
            if not from_start:
                self._offset = f.read().rfind(b"\n") + 1

    def _open(self) -> BinaryIO:
        """The live file (FileNotFoundError also for anything not a regular file)."""
        try:
            return os.fdopen(open_regular(self.paths.log), "rb")
        except (UnsafeFile, NotADirectoryError):
            raise FileNotFoundError(self.paths.log) from None

    def read(self) -> list[bytes]:
        """The complete lines appended since the last call, oldest first."""
        lines: list[bytes] = []
        try:
            with self._open() as f:
                inode = os.fstat(f.fileno()).st_ino
                if inode != self._inode:
                    lines += self._rest_of_rotated()
                    self._inode, self._offset = inode, 0
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self._rest_of_rotated()
        end = data.rfind(b"\n") + 1
        self._offset += end
        lines += [line for line in data[:end].splitlines() if line]
        return lines

    def _rest_of_rotated(self) -> list[bytes]:
        """What the file we were reading got before it became a segment, and every
        segment after it (rotations between two reads)."""
        if self._inode is None:
            return []
        parts = segments(self.paths)
        for at in range(len(parts) - 1, -1, -1):
            try:
                if parts[at].stat().st_ino != self._inode:
                    continue
            except FileNotFoundError:
                continue
            lines = []
            for n, part in enumerate(parts[at:]):
                try:
                    data = _read(part)
                except FileNotFoundError:
                    continue
                lines += [
                    line for line in data[self._offset if n == 0 else 0 :].splitlines() if line
                ]
            self._inode, self._offset = None, 0
            return lines
        self._inode, self._offset = None, 0
        return []
