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
import errno
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from hive_core.errors import OfficeError
from hive_core.fsio import UnsafeFile, open_regular
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN

log = logging.getLogger(__name__)

# Bounds what one commit re-stores of the log (about a tenth of this once compressed,
# until gc makes it a delta); segments cost the same in total whatever their size.
LOG_ROTATE_BYTES = 256 << 10
_SEGMENT = re.compile(r"(\d+)\.jsonl")


class UnsafeLog(OfficeError):
    """The log's folder or live file is not what the office made (a symbolic link, a
    file for the folder): nothing is rotated. The message is the sentence to report."""


def segments(paths: HivePaths) -> list[Path]:
    """The rotated segments, oldest first (none while `log/` is a symbolic link: its
    files are not the hive's)."""
    try:
        fd = os.open(
            paths.log_segments, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError:
        return []
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    numbered = sorted((int(m.group(1)), n) for n in names if (m := _SEGMENT.fullmatch(n)))
    return [paths.log_segments / name for _, name in numbered]


def _kind(mode: int, wanted: str) -> str:
    return "a symbolic link" if stat.S_ISLNK(mode) else f"not a {wanted}"


def log_problem(folder: int | None, live: int | None) -> str | None:
    """Why the log may not be rotated, from the modes (lstat, never followed) of `log/`
    and `log.jsonl` in the hive (None: missing); None if it may. Rotation renames the
    live file into the folder: through a link that would put the office's log, and
    every segment after it, wherever the link points."""
    if folder is not None and not stat.S_ISDIR(folder):
        return (
            f"the hive's log/ folder is {_kind(folder, 'folder')}, so the office does not rotate its "
            "log into it (nothing is written outside the hive): move hive/log aside and "
            "the office makes the folder again at its next commit."
        )
    if live is not None and not stat.S_ISREG(live):
        return (
            f"the hive's log.jsonl is {_kind(live, 'regular file')}, so the office does not "
            "rotate it: move hive/log.jsonl aside and the office starts a new one."
        )
    return None


def _lstat_mode(name: str, folder: int) -> int | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


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
    is in progress. Returns the paths that changed (for the committer). UnsafeLog (and
    nothing moved) if `log/` or `log.jsonl` is a link or the wrong kind of file: every
    name is looked up from the hive's own folder and never followed.

    Call it on the loop that routes: the router's appends then never race the rename.
    (A line another thread appends during the rename lands at the end of the segment,
    still in the log, and that segment is committed again once.)"""
    live_name, folder_name = paths.log.name, paths.log_segments.name
    try:
        hive = os.open(paths.hive, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        log.warning("log rotation failed: %s", err)
        return []
    try:
        live = _lstat_mode(live_name, hive)
        if (why := log_problem(_lstat_mode(folder_name, hive), live)) is not None:
            raise UnsafeLog(why)
        if live is None:
            return []
        if os.stat(live_name, dir_fd=hive, follow_symlinks=False).st_size < limit:
            return []
        if _claims_in_progress(paths):
            return []
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder_name, 0o700, dir_fd=hive)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            folder = os.open(folder_name, flags, dir_fd=hive)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link just now
                raise UnsafeLog(log_problem(stat.S_IFLNK, None) or "") from None
            raise
        try:
            numbers = [int(m.group(1)) for n in os.listdir(folder) if (m := _SEGMENT.fullmatch(n))]
            segment = f"{max(numbers, default=0) + 1:04d}.jsonl"
            if _lstat_mode(segment, folder) is not None:
                raise FileExistsError(f"{segment} exists but is not numbered like a segment")
            os.rename(live_name, segment, src_dir_fd=hive, dst_dir_fd=folder)
        finally:
            os.close(folder)
        # An appender may have created the new live file already; it is never replaced.
        with contextlib.suppress(FileExistsError):
            new = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(live_name, new, 0o600, dir_fd=hive))
    except OSError as err:
        # The log only grows on; the next commit tries again.
        log.warning("log rotation failed: %s", err)
        return []
    finally:
        os.close(hive)
    return [paths.log_segments / segment, paths.log]


class LogRotation:
    """The office's rotation, before each commit: a log it may not rotate (UnsafeLog) is
    said once, in the office's own log and through `report` (health), and cleared
    (`report(None)`) once it is right again."""

    def __init__(
        self,
        paths: HivePaths,
        report: Callable[[str | None], None],
        limit: int = LOG_ROTATE_BYTES,
    ) -> None:
        self.paths = paths
        self.report = report
        self.limit = limit
        self._problem: str | None = None

    def __call__(self) -> list[Path]:
        try:
            changed, problem = rotate_if_due(self.paths, self.limit), None
        except UnsafeLog as unsafe:
            changed, problem = [], str(unsafe)
        if problem != self._problem:
            self._problem = problem
            if problem is not None:
                log.warning("log not rotated: %s", problem)
            self.report(problem)
        return changed


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
