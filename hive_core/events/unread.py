"""The office's view of each agent's unread mail, for hooks and the wake path.

Hooks and the watchdog ask for an agent's unread mail on every event and tick; reading
every file of the inbox each time cost 3.7 s at 20k unread. This index keeps one summary
(`MailItem`) per unread file and goes back to the disk only when the inbox folder
changed: one `stat` of the folder per question, a listing when its mtime (or the folder
itself) is new, and a decode only for names it has not seen. Delivery (a link into the
folder) and `hive done` (a rename out of it) both change the folder's mtime, so the
view is exact whoever moved the files, with no dependence on the watcher's timing.

A folder mtime taken less than `RACY_S` before the listing may still change within the
same timestamp tick; such a listing is not trusted and the next question lists again.

Where inotify is available (Linux), an inbox once listed is also watched: the kernel
queues the name of every file created, moved or removed there as it happens, and a
question reads that queue and looks at the files it names instead of listing the folder
again. In a burst the folder changes between any two questions, and listing thousands of
names at each of the loop's ticks held the person's keys (issue 25). A queue that
overflowed, or a folder moved or replaced, is listed again.

Every file is read bounded (no symlinks, no FIFOs, at most MESSAGE_FILE_MAX bytes,
msgspec's nesting guard): one that cannot be read is left on disk, reported once, and
kept out of the view, so it never breaks another message, agent or tick.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from hive_core.fsio import is_temp_name
from hive_core.paths import HivePaths
from hive_core.schema import MESSAGE_FILE_MAX, SUBJECT_MAX, MailItem, Message

# Filesystems stamp mtimes from a coarse clock (a jiffy on Linux, up to 1 s elsewhere).
RACY_S = 1.0
# A sender longer than this is not one the router wrote: cut, the message still shows.
SENDER_MAX = 64

# inotify(7): what a watched inbox reports, and what the queue says of itself.
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = (
    0x400, 0x800, 0x2000, 0x4000, 0x8000
)  # fmt: skip
IN_ONLYDIR, IN_DONT_FOLLOW = 0x01000000, 0x02000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
WATCHED = (
    IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
    | IN_ONLYDIR | IN_DONT_FOLLOW
)  # fmt: skip
# The folder itself went (or its watch did): it is listed again.
GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name, NUL-padded


# The whole message is validated, as `hive inbox` does: a digest must never name a
# file the agent's own command then cannot show.
_decode = msgspec.json.Decoder(Message).decode

Skipped = Callable[[str, str, str], None]  # (agent id, file name, why)


@dataclass
class _Box:
    # (st_dev, st_ino, st_mtime_ns) of the folder when it was last listed; None: list again.
    stamp: tuple[int, int, int] | None = None
    # File name -> (inode, summary or None when the file could not be read).
    entries: dict[str, tuple[int, MailItem | None]] = field(default_factory=dict)
    items: tuple[MailItem, ...] = ()
    # Their ids, made once per listing: a hook at 20k unread must not hash them each time.
    ids: frozenset[str] = frozenset()
    # (st_dev, st_ino) of the folder when it was listed under a watch: the box is then
    # exact but for the names the watch has reported since (`UnreadIndex._pending`).
    watched: tuple[int, int] | None = None


class UnreadIndex:
    def __init__(self, paths: HivePaths, *, skipped: Skipped) -> None:
        self.paths = paths
        self.skipped = skipped
        self._boxes: dict[str, _Box] = {}
        # The office's route thread reads a burst's inboxes here as it delivers them, so
        # the hooks and wake ticks on the loop find them read. Held only to swap a box
        # and to take what the watch reported: a box is never changed once made, so a
        # reader needs no lock to use one.
        self._lock = threading.Lock()
        # Made at the first question (an office made and never run holds none);
        # None once closed, or where there is no inotify: the stamp decides then.
        self._changes: _Changes | None = None
        self._opened = False
        self._watches: dict[int, str] = {}  # watch descriptor -> agent id
        self._watch_of: dict[str, int] = {}
        # Names the watch reported in an agent's inbox since its box was made.
        self._pending: dict[str, set[str]] = {}
        # Agents whose folder went or whose reports were lost: listed again.
        self._stale: set[str] = set()

    def unread(self, agent_id: str) -> tuple[MailItem, ...]:
        """The agent's unread mail, oldest first, as of now."""
        return self.snapshot(agent_id)[0]

    def snapshot(self, agent_id: str) -> tuple[tuple[MailItem, ...], frozenset[str]]:
        """The agent's unread mail as of now, and the set of its ids."""
        box = self._current(agent_id)
        return box.items, box.ids

    def close(self) -> None:
        """Stop watching (the office stopped); questions then list as without inotify."""
        with self._lock:
            changes, self._changes, self._opened = self._changes, None, True
            self._watches.clear()
            self._watch_of.clear()
        if changes is not None:
            changes.close()

    def _current(self, agent_id: str) -> _Box:
        """The agent's box as of now. The folder is listed and new files decoded outside
        the lock: the loop asking (a hook, a tick) never waits while the route thread
        reads the hundreds of files a burst delivered, it reads what it needs itself.
        Should another thread put a box in place meanwhile, this one is not put over it:
        the names it looked at are looked at again against that box."""
        folder = self.paths.mailbox(agent_id).inbox
        while True:
            try:
                st = os.lstat(folder)
            except FileNotFoundError:
                st = None
            if st is None or not stat.S_ISDIR(st.st_mode):
                # Gone, or not the office's folder (a file or a symlink planted there):
                # nothing in it is mail; the router moves it aside.
                with self._lock:
                    self._boxes[agent_id] = _Box()
                    return self._boxes[agent_id]
            folder_id = (st.st_dev, st.st_ino)
            names: set[str] | None = None
            watching = False
            with self._lock:
                box = self._boxes.setdefault(agent_id, _Box())
                changes = self._reported()
                if changes is not None and box.watched == folder_id and agent_id not in self._stale:
                    names = self._pending.pop(agent_id, None)
                    if not names:
                        return box
                elif changes is not None:
                    # Watched before it is listed: what changes while it is listed is
                    # reported, and looked at again by the next question.
                    watching = self._watch(changes, agent_id, folder)
            if names is not None:
                fresh, skipped = _updated(folder, box, names)
            elif watching:
                fresh, skipped = _relisted(folder, box, None, folder_id)
            else:
                stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
                if stamp == box.stamp:
                    return box
                racy = time.time_ns() - st.st_mtime_ns < RACY_S * 1e9
                fresh, skipped = _relisted(folder, box, None if racy else stamp)
            with self._lock:
                if self._boxes.get(agent_id) is not box:
                    if names:
                        self._pending.setdefault(agent_id, set()).update(names)
                    elif watching:
                        # What was reported before this listing is in it, not in the
                        # box put in place instead: that box is listed again.
                        self._stale.add(agent_id)
                    continue
                # What one of two threads could not read is reported once, by whichever
                # puts its box in place first.
                for name, why in skipped:
                    if box.entries.get(name, (None,))[0] != fresh.entries[name][0]:
                        self.skipped(agent_id, name, why)
                self._boxes[agent_id] = fresh
            return fresh

    def _reported(self) -> _Changes | None:
        """Under the lock: take what the watch reported, by agent. None without a watch."""
        if not self._opened:
            self._opened = True
            self._changes = _Changes.open()
        changes = self._changes
        if changes is None:
            return None
        overflowed = False
        for wd, mask, name in changes.read():
            if mask & IN_Q_OVERFLOW:
                overflowed = True
                continue
            agent_id = self._watches.get(wd)
            if agent_id is None:
                continue
            if mask & GONE:
                self._stale.add(agent_id)
                if mask & IN_IGNORED:
                    del self._watches[wd]
                    if self._watch_of.get(agent_id) == wd:
                        del self._watch_of[agent_id]
            elif name.endswith(".json") and not is_temp_name(name):
                self._pending.setdefault(agent_id, set()).add(name)
        if overflowed:
            self._stale.update(self._watch_of)
        return changes

    def _watch(self, changes: _Changes, agent_id: str, folder: os.PathLike[str]) -> bool:
        """Under the lock: watch the agent's folder (again) before it is listed."""
        wd = changes.watch(folder)
        old = self._watch_of.pop(agent_id, None)
        if old is not None and old != wd:
            self._watches.pop(old, None)
            changes.unwatch(old)
        self._stale.discard(agent_id)
        self._pending.pop(agent_id, None)
        if wd is None:
            return False
        self._watches[wd] = agent_id
        self._watch_of[agent_id] = wd
        return True

    def refresh(self, agent_ids: list[str]) -> None:
        """Read every inbox now (at start, so the first hook does not pay for it)."""
        for agent_id in agent_ids:
            self.unread(agent_id)


class _Changes:
    """An inotify instance: the names created, moved and removed in watched folders."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self.fd = fd
        self._closed = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls) -> _Changes | None:
        """None where inotify is missing or refused (no instance left to this user)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)  # the C library Python runs on
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def watch(self, folder: os.PathLike[str]) -> int | None:
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), WATCHED)
        return wd if wd >= 0 else None

    def unwatch(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)

    def read(self) -> Iterable[tuple[int, int, str]]:
        """What was reported since the last read: (watch, mask, name) each."""
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                start = offset + _EVENT.size
                name = data[start : start + size].split(b"\0", 1)[0]
                offset = start + size
                yield wd, mask, os.fsdecode(name)

    def close(self) -> None:
        self._closed()


def _relisted(
    folder: os.PathLike[str],
    box: _Box,
    stamp: tuple[int, int, int] | None,
    watched: tuple[int, int] | None = None,
) -> tuple[_Box, list[tuple[str, str]]]:
    """The folder's box as listed now (`box`, the last listing, is not changed: another
    thread may be reading it), and the files of it that cannot be read, with why."""
    try:
        with os.scandir(folder) as it:
            listing = {
                e.name: e.inode()
                for e in it
                if e.name.endswith(".json") and not is_temp_name(e.name)
            }
    except (FileNotFoundError, NotADirectoryError):
        listing = {}
    old = box.entries
    entries: dict[str, tuple[int, MailItem | None]] = {}
    skipped: list[tuple[str, str]] = []
    changed = len(listing) != len(old)
    for name, inode in listing.items():
        known = old.get(name)
        if known is not None and known[0] == inode:
            entries[name] = known
            continue
        changed = True
        item, why = _summary(os.path.join(folder, name), name)
        if why is not None:
            skipped.append((name, why))
        entries[name] = (inode, item)
    if not changed:
        # Listed again only because the last listing was too recent to trust: the
        # same files, so the sorted view stands.
        return _Box(stamp, entries, box.items, box.ids, watched), skipped
    items = tuple(item for _, (_, item) in sorted(entries.items()) if item is not None)
    return _Box(stamp, entries, items, frozenset(item.id for item in items), watched), skipped


def _updated(
    folder: os.PathLike[str], box: _Box, names: set[str]
) -> tuple[_Box, list[tuple[str, str]]]:
    """`box` with the files `names` looked at again (each new, replaced or gone), and
    those of them that cannot be read, with why. The rest of the folder is as listed."""
    entries = dict(box.entries)
    skipped: list[tuple[str, str]] = []
    gone: set[str] = set()
    new: list[str] = []
    for name in sorted(names):
        path = os.path.join(folder, name)
        try:
            inode = os.lstat(path).st_ino
        except FileNotFoundError:
            inode = None
        known = entries.get(name)
        if known is not None and known[0] == inode:
            continue
        if known is not None:
            gone.add(name)
            del entries[name]
        if inode is None:
            continue
        item, why = _summary(path, name)
        if item is None and why is None:
            continue  # gone again meanwhile
        if why is not None:
            skipped.append((name, why))
        entries[name] = (inode, item)
        new.append(name)
    items, ids = box.items, box.ids
    if gone:
        cut = {name[: -len(".json")] for name in gone}
        items = tuple(item for item in items if item.id not in cut)
        ids = ids - cut
    arrived = [item for name in new if (item := entries[name][1]) is not None]
    if arrived:
        if items and f"{arrived[0].id}.json" < f"{items[-1].id}.json":
            # Not all after the last one (the router's names grow with time; a name
            # written by hand need not): sorted whole, as a listing is.
            items = tuple(item for _, (_, item) in sorted(entries.items()) if item is not None)
        else:
            items += tuple(arrived)
        ids = ids | {item.id for item in arrived}
    return _Box(None, entries, items, ids, box.watched), skipped


def _summary(path: str, name: str) -> tuple[MailItem | None, str | None]:
    """One file's summary, or why it cannot be read (None if it simply vanished)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        # ELOOP: a symlink, which the router never makes.
        return None, f"it cannot be opened as a plain file ({e.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a regular file"
        if st.st_size > MESSAGE_FILE_MAX:
            return None, f"it is {st.st_size} bytes, over the {MESSAGE_FILE_MAX}-byte limit"
        data = os.read(fd, MESSAGE_FILE_MAX + 1)
    except OSError as e:
        return None, f"it cannot be read ({e.strerror})"
    finally:
        os.close(fd)
    try:
        message = _decode(data)
    except RecursionError:
        return None, "its JSON is nested too deeply"
    except msgspec.DecodeError as e:
        return None, f"it is not a message ({e})"
    return (
        MailItem(
            # The file's name, not its `id` field: it is what `hive done` takes.
            id=name[: -len(".json")],
            sender=message.sender[:SENDER_MAX],
            act=message.act,
            subject=message.subject[:SUBJECT_MAX],
            needs_human=message.needs_human,
            origin=message.origin,
            injection=message.injection,
        ),
        None,
    )
