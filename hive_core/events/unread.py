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

Every file is read bounded (no symlinks, no FIFOs, at most MESSAGE_FILE_MAX bytes,
msgspec's nesting guard): one that cannot be read is left on disk, reported once, and
kept out of the view, so it never breaks another message, agent or tick.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from hive_core.fsio import is_temp_name
from hive_core.paths import HivePaths
from hive_core.schema import MESSAGE_FILE_MAX, SUBJECT_MAX, MailItem, Message

# Filesystems stamp mtimes from a coarse clock (a jiffy on Linux, up to 1 s elsewhere).
RACY_S = 1.0
# A sender longer than this is not one the router wrote: cut, the message still shows.
SENDER_MAX = 64


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


class UnreadIndex:
    def __init__(self, paths: HivePaths, *, skipped: Skipped) -> None:
        self.paths = paths
        self.skipped = skipped
        self._boxes: dict[str, _Box] = {}
        # The office's route thread reads a burst's inboxes here as it delivers them, so
        # the hooks and wake ticks on the loop find them read. Held only to swap a box:
        # a box is never changed once made, so a reader needs no lock to use one.
        self._lock = threading.Lock()

    def unread(self, agent_id: str) -> tuple[MailItem, ...]:
        """The agent's unread mail, oldest first, as of now."""
        return self.snapshot(agent_id)[0]

    def snapshot(self, agent_id: str) -> tuple[tuple[MailItem, ...], frozenset[str]]:
        """The agent's unread mail as of now, and the set of its ids."""
        box = self._current(agent_id)
        return box.items, box.ids

    def _current(self, agent_id: str) -> _Box:
        """The agent's box as of now. The folder is listed and new files decoded outside
        the lock: the loop asking (a hook, a tick) never waits while the route thread
        reads the hundreds of files a burst delivered, it reads what it needs itself."""
        folder = self.paths.mailbox(agent_id).inbox
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
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
        with self._lock:
            box = self._boxes.setdefault(agent_id, _Box())
        if stamp == box.stamp:
            return box
        listed_at = time.time_ns()
        racy = listed_at - st.st_mtime_ns < RACY_S * 1e9
        fresh, skipped = _relisted(folder, box, None if racy else stamp)
        with self._lock:
            # Another thread may have listed meanwhile: what one of them could not read
            # is reported once, by whichever installs its listing first.
            known = self._boxes.get(agent_id, box).entries
            for name, why in skipped:
                if known.get(name, (None,))[0] != fresh.entries[name][0]:
                    self.skipped(agent_id, name, why)
            self._boxes[agent_id] = fresh
        return fresh

    def refresh(self, agent_ids: list[str]) -> None:
        """Read every inbox now (at start, so the first hook does not pay for it)."""
        for agent_id in agent_ids:
            self.unread(agent_id)


def _relisted(
    folder: os.PathLike[str], box: _Box, stamp: tuple[int, int, int] | None
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
        return _Box(stamp, entries, box.items, box.ids), skipped
    items = tuple(item for _, (_, item) in sorted(entries.items()) if item is not None)
    return _Box(stamp, entries, items, frozenset(item.id for item in items)), skipped


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
