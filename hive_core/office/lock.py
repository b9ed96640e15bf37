"""One office per home: an flock on the home folder, and who holds it when refused."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from hive_core.errors import OfficeError
from hive_core.hint import office_command
from hive_core.paths import HivePaths


class OfficeBusy(OfficeError):
    def __init__(self, paths: HivePaths, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"another office is already running on {paths.home} ({who}): "
            f"`{office_command(paths.home)}` shows it, `{office_command(paths.home, 'stop')}` "
            "stops it; or use --home for a different office."
        )
        self.pid = pid


@contextlib.contextmanager
def office_lock(paths: HivePaths) -> Iterator[None]:
    """Hold the home's office lock: an flock on the home folder itself. A lock file could
    be deleted and another office would lock a new one; the folder cannot be replaced
    while it holds the office. flock dies with the process, so a crash never leaves a
    stale lock behind."""
    fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OfficeBusy(paths, _read_pid(paths.pid_file) or _flock_holder(fd)) from None
        paths.run.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.pid_file.write_text(f"{os.getpid()}\n")
        try:
            yield
        finally:
            paths.pid_file.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _flock_holder(fd: int) -> int | None:
    """Who holds the flock on `fd`'s file, from /proc/locks (Linux), for when the pid
    file is gone too."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            with contextlib.suppress(ValueError):
                return int(fields[4])
    return None
