"""The router's effects: claim outbox files, deliver, log, archive.

Exactly once, by construction. Each file goes through these steps, and each step is
either atomic or idempotent, so a crash between any two of them is repaired by simply
running the remaining steps again at start-up:

1. claim: rename `outbox/<name>` to `outbox/.routing/<id>~<name>` (the name's last
   CLAIM_NAME_BYTES bytes, so any name fits). The rename is the moment the id is
   chosen; from then on the id is fixed by the file name, and every file derived from
   the message (deliveries, notices, triage, archive, its hop record) is named by it.
2. deliver: write the message once to a temp file, then link(2) it to `inbox/<id>.json`
   of each recipient, unless that inbox or its `.done/` already has the id (a crash
   after delivery, or a reader that already finished with it). link never overwrites,
   so there is never a second copy.
3. log: append the outcome line, unless this is a recovered claim whose line is already
   in the tail of log.jsonl.
4. archive: link the same file to `outbox/.sent/<id>.json` (or move the raw file to
   `outbox/.bad/` with a `.reason`), then drop the claim. Dropping the claim is the
   commit point. A file too large to be a message never enters the hive's git: its
   `.reason` records its size and hash, and its bytes are moved to the home's
   run/quarantine/ or dropped (decide.oversize_fate); the sender is told which.

Files are handled in batches (everything waiting in one outbox): the data of a whole
batch is made durable with one filesystem sync before it is linked into place, and
the links with another before the claims go, instead of an fsync per file. A message's
archive and its recipients' copies are hard links of one file (they are the same
bytes; readers only ever rename them, never write into them).

Nothing an agent puts in its folder stops a pass: the folders of a mailbox are checked
(and whatever replaced one moved aside) before they are used, files are read without
following symlinks, and a file whose handling fails is quarantined with the reason
while the rest of the batch goes on. Only the disk itself stops a pass: on a full disk
nothing of the batch is placed, its claims stay, the router says it is paused
(DiskFull) and the next pass finishes them.

Only the office process runs a router (the office lock guarantees one), so no two
routers race over a claim.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec

from hive_core.errors import OfficeError
from hive_core.fsio import (
    DISK_FULL_ERRNOS,
    FILE_MODE,
    TEMP_PREFIX,
    UnsafeFile,
    append_line,
    atomic_write,
    ensure_dir,
    is_disk_full,
    is_temp_name,
    open_regular,
    read_regular,
    read_regular_stat,
    read_tail,
    sync_filesystem,
    write_all,
)
from hive_core.hive import mailbox_folders
from hive_core.ids import is_message_id, new_message_id, utc_now_iso
from hive_core.mail import find_message
from hive_core.pace import no_pace
from hive_core.paths import HivePaths
from hive_core.routing.rules import (
    QUARANTINE_HASH_MAX,
    Oversize,
    Rejection,
    RoutePlan,
    RouteRoster,
    check_size,
    clean_line,
    display_name,
    is_safe_token,
    moved_notice,
    oversize_fate,
    oversize_record,
    parse_draft,
    plan_route,
    rejection_log,
    rejection_notice,
    stray_reason,
)
from hive_core.schema import (
    JSON_DEPTH_MAX,
    MESSAGE_FILE_MAX,
    TOKEN_MAX,
    Draft,
    HopRecord,
    LogEvent,
    Message,
    json_depth,
)

# A hand-written file that does not parse yet may still be being written by a program
# that does not write atomically: give it this long before quarantining it. A name that
# is not *.json gets as long to be renamed before it is reported.
WRITE_GRACE_S = 2.0
# How much of log.jsonl's end to search when recovering a claim (its line, if written,
# is among the last few thousand).
LOG_TAIL_BYTES = 1 << 20
# Claims handled per batch: bounds how long one pass holds the loop.
BATCH_MAX = 256
# A file up to this size keeps the draft read when it was claimed (a batch holds at
# most BATCH_MAX of them); a larger one is read again when it is routed.
KEEP_READ_MAX = 16 << 10
# How much of an outbox file's name its claim keeps: with the id (28 bytes) and the
# separator, well within the 255 bytes a name may have, whatever the original's length.
CLAIM_NAME_BYTES = 160
# Where the bytes of files too large to be messages are set aside, in the home's run/
# (never in the hive's git; decide.oversize_fate).
QUARANTINE_FOLDER = "quarantine"
# A day's hop records the router reads back at most (a line is ~100 bytes).
HOP_INDEX_DAY_MAX = 256 << 20
# Errors that are the disk's, not one file's: they stop the pass instead of quarantining.
_DISK_ERRNOS = DISK_FULL_ERRNOS | {errno.EIO, errno.EROFS}

_encode = msgspec.json.Encoder().encode
_hop_decoder = msgspec.json.Decoder(HopRecord)
# Claim file names: `<id>~<original name>`; ids never contain '~'.
_CLAIM_SEP = "~"
_LOG_MSG = re.compile(rb'"msg":"([^"]*)"')


class HopIndex:
    """The office's record of every message it delivered (hops, thread, task), one line
    per message in `run/threads/<day>.jsonl`: appended once per batch, before anything
    of the batch is placed, and read back (a day at a time, the last few days kept) when
    a reply names its parent. A redone batch appends the same lines again; they are
    equal. A line a crash cut short is skipped."""

    DAYS_KEPT = 3

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._days: dict[str, dict[str, HopRecord]] = {}
        # Passes run on the route thread, the office's own notices on its loop.
        self._lock = threading.Lock()

    def add(self, messages: list[Message]) -> None:
        by_day: dict[str, list[HopRecord]] = {}
        for m in messages:
            record = HopRecord(
                id=m.id,
                hops=m.hops,
                conversation=m.conversation,
                task=m.task,
                sender=m.sender,
                to=m.to,
            )
            by_day.setdefault(_day(m.id), []).append(record)
        if by_day:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for day, records in by_day.items():
            append_line(self.folder / f"{day}.jsonl", b"\n".join(map(_encode, records)))
            with self._lock:
                if day in self._days:
                    self._days[day].update((r.id, r) for r in records)

    def get(self, msg_id: str) -> HopRecord | None:
        day = _day(msg_id)
        with self._lock:
            known = self._days.pop(day, None)
            if known is None:
                known = self._load(day)
            self._days[day] = known  # the most recently used last
            while len(self._days) > self.DAYS_KEPT:
                del self._days[next(iter(self._days))]
            return known.get(msg_id)

    def _load(self, day: str) -> dict[str, HopRecord]:
        try:
            raw = read_regular(self.folder / f"{day}.jsonl", HOP_INDEX_DAY_MAX)
        except (OSError, UnsafeFile):
            return {}
        records = {}
        for line in raw.splitlines():
            if json_depth(line) > JSON_DEPTH_MAX:
                continue
            try:
                record = _hop_decoder.decode(line)
            except msgspec.DecodeError:
                continue  # cut short by a crash or a full disk
            records[record.id] = record
        return records


def _day(msg_id: str) -> str:
    """The day an id was made (ids start with it); anything else shares one file."""
    day = msg_id[:8]
    return day if day.isdigit() and len(day) == 8 else "other"


class DiskFull(OfficeError):
    """Routing is paused because the disk (or the quota) is full. Nothing half-written
    was delivered; the claims stay and the next pass that finds room finishes them."""


@dataclass
class RouteStats:
    routed: int = 0
    quarantined: int = 0
    deferred: int = 0
    touched: set[Path] = field(default_factory=set)
    notes: list[tuple[str, str]] = field(default_factory=list)
    # (sender, recipients) of each routed message, for whoever shows mail moving.
    routes: list[tuple[str, list[str]]] = field(default_factory=list)
    # Whose inbox got a new copy (notices to senders included), so nobody re-derives it.
    inboxes: set[str] = field(default_factory=set)
    # Claims whose placing failed for a reason of their own; they stay and are retried.
    errors: list[str] = field(default_factory=list)


@dataclass
class _Work:
    """One claim on its way through a batch."""

    who: str
    claim: Path
    msg_id: str
    source_name: str
    recovered: bool
    # The draft read when the file was claimed, and the identity of the file it came
    # from (_identity): routed from these if the claim is still that file.
    read: tuple[Draft, tuple[int, int, int, int]] | None = None
    outcome: RoutePlan | Rejection | None = None
    # The messages of the outcome, and the bytes each is written from, by message id.
    messages: list[Message] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)


class Router:
    def __init__(
        self,
        paths: HivePaths,
        roster: RouteRoster,
        *,
        on_change: Callable[[RouteStats], None] | None = None,
        fsync: bool = True,
        give_way: Callable[[], None] = no_pace,
    ) -> None:
        self.paths = paths
        self.roster = roster
        self.fsync = fsync
        self.on_change = on_change
        # Called between two files' work: a burst gives way to the person's keys (pace.py).
        self.give_way = give_way
        # Files that failed to parse while young: retried after WRITE_GRACE_S.
        self.deferred: set[Path] = set()
        # Why routing is paused (a full disk), or None while it works.
        self.paused: str | None = None
        self.hops = HopIndex(paths.threads)
        # Mailboxes whose folders this pass already checked.
        self._checked: set[str] = set()
        # Unguessable temp-file names, drawn from one urandom call for many files.
        self._tokens: list[str] = []

    # --- entry points ---------------------------------------------------------------

    def senders(self) -> list[str]:
        return sorted(self.roster.senders())

    def recover(self) -> RouteStats:
        """At start-up: sweep the temp files a crash left in folders only the office
        writes, and finish every claim a previous run left behind."""

        def sweep(who: str, stats: RouteStats) -> None:
            self._check_box(who, stats)
            box = self.paths.mailbox(who)
            for folder in (box.inbox, box.sent, box.bad, box.routing):
                _remove_temp_files(folder)

        def body(stats: RouteStats) -> None:
            for who in self.senders():
                self._for_sender(who, stats, sweep)
            _remove_temp_files(self.paths.triage)
            self._finish(stats)

        return self._pass(body)

    def finish_claims(self) -> RouteStats:
        """Finish claims whose routing was interrupted (a crash, a full disk)."""
        return self._pass(self._finish)

    def scan_all(self) -> RouteStats:
        def body(stats: RouteStats) -> None:
            for who in self.senders():
                self._for_sender(who, stats, self._scan)

        return self._pass(body)

    def scan(self, who: str) -> RouteStats:
        def body(stats: RouteStats) -> None:
            if who in self.roster.senders():
                self._for_sender(who, stats, self._scan)

        return self._pass(body)

    def post(self, recipient: str, message: Message) -> None:
        """Deliver a message the office itself writes (a standup, a notice): straight into
        the inbox, logged like routed mail."""
        stats = RouteStats()
        try:
            self._repair_box(recipient, stats)
            self._post(recipient, message, stats)
        finally:
            self._report(stats)

    def tell_moved(self, who: str, moved: list[tuple[Path, Path]]) -> None:
        """Tell `who` which of its folders were moved aside (by ensure_mailbox at start)."""
        stats = RouteStats()
        try:
            for folder, aside in moved:
                self._tell_moved(who, folder, aside, stats)
        finally:
            self._report(stats)

    # --- a pass ---------------------------------------------------------------------

    def _pass(self, body: Callable[[RouteStats], None]) -> RouteStats:
        """Run one pass. A full disk pauses routing (DiskFull, `paused` says why) until
        a pass gets through; what the pass did until then is still reported."""
        stats = RouteStats()
        self._checked = set()
        try:
            self._check_office(stats)
            body(stats)
        except OSError as e:
            if not is_disk_full(e):
                raise
            self.paused = (
                f"the disk is full ({e.strerror}); routing is paused and resumes by itself "
                "when there is room again"
            )
            raise DiskFull(self.paused) from e
        finally:
            self._report(stats)
        self.paused = None
        return stats

    def _check_office(self, stats: RouteStats) -> None:
        """The office's own folders and its log are what they should be."""
        for folder in (self.paths.agents_dir, self.paths.triage):
            if (aside := ensure_dir(folder)) is not None:
                self._office_log(f"{folder.name} was not a folder; moved to {aside.name}", stats)
        try:
            st = os.lstat(self.paths.log)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            log = self.paths.log
            aside = log.with_name(f"{log.name}.moved-{new_message_id()}")
            os.rename(log, aside)
            self._office_log(f"{log.name} was not a regular file; moved to {aside.name}", stats)

    def _check_box(self, who: str, stats: RouteStats) -> None:
        """Once a pass: the folders of `who`'s mailbox are real folders."""
        if who not in self._checked:
            self._repair_box(who, stats)
            self._checked.add(who)

    def _repair_box(self, who: str, stats: RouteStats) -> None:
        box = self.paths.mailbox(who)
        moved = [
            (folder, aside)
            for folder in mailbox_folders(box)
            if (aside := ensure_dir(folder)) is not None
        ]
        for folder, aside in moved:
            self._tell_moved(who, folder, aside, stats)

    def _tell_moved(self, who: str, folder: Path, aside: Path, stats: RouteStats) -> None:
        hive = self.paths.hive
        notice = moved_notice(
            f"{new_message_id()}-moved",
            who,
            f"{folder.relative_to(hive)}/",
            str(aside.relative_to(hive)),
        )
        stats.touched.update({folder, aside})
        self._post(who, notice, stats)

    def _post(self, recipient: str, message: Message, stats: RouteStats) -> None:
        box = self.paths.mailbox(recipient)
        target = box.inbox / f"{message.id}.json"
        self.hops.add([message])
        atomic_write(target, _encode(message), fsync=self.fsync)
        event = LogEvent(
            ts=message.created_at,
            kind="office",
            msg=message.id,
            sender=message.sender,
            to=recipient,
            recipients=[recipient],
            act=message.act,
            subject=message.subject,
        )
        append_line(self.paths.log, _encode(event))
        stats.touched.add(target)
        stats.notes.append(("office", recipient))
        stats.routes.append((message.sender, [recipient]))
        stats.inboxes.add(recipient)

    def _office_log(self, detail: str, stats: RouteStats) -> None:
        append_line(
            self.paths.log, _encode(LogEvent(ts=utc_now_iso(), kind="office", detail=detail))
        )
        stats.notes.append(("office", "router"))

    # --- claiming -------------------------------------------------------------------

    def _scan(self, who: str, stats: RouteStats) -> None:
        self._check_box(who, stats)
        files = _entries(self.paths.mailbox(who).outbox)
        for start in range(0, len(files), BATCH_MAX):
            batch = [
                w for p in files[start : start + BATCH_MAX] if (w := self._claim(who, p, stats))
            ]
            self._run_batch(batch, stats)

    def _finish(self, stats: RouteStats) -> None:
        for who in self.senders():
            self._for_sender(who, stats, self._finish_sender)

    def _finish_sender(self, who: str, stats: RouteStats) -> None:
        self._check_box(who, stats)
        routing = self.paths.mailbox(who).routing
        claims = [self._reclaim(who, routing / name) for name in _entries_names(routing)]
        for start in range(0, len(claims), BATCH_MAX):
            self._run_batch(claims[start : start + BATCH_MAX], stats)

    def _for_sender(
        self, who: str, stats: RouteStats, step: Callable[[str, RouteStats], None]
    ) -> None:
        """One sender's folders failing (for a reason of their own, not the disk's) must
        not keep the others' mail from moving: say so and go on."""
        try:
            step(who, stats)
        except Exception as e:
            if _is_disk_error(e):
                raise
            detail = f"routing {who}'s outbox failed: {e!r}"
            stats.errors.append(detail)
            self._office_log(clean_line(detail), stats)

    def _claim(self, who: str, path: Path, stats: RouteStats) -> _Work | None:
        self.give_way()
        try:
            ready, read = self._ready(path)
        except FileNotFoundError:
            self.deferred.discard(path)
            return None
        if not ready:
            self.deferred.add(path)
            stats.deferred += 1
            return None
        self.deferred.discard(path)
        claim = self.paths.mailbox(who).routing / _claim_name(new_message_id(), path.name)
        try:
            os.rename(path, claim)
        except FileNotFoundError:
            return None
        stats.touched.add(path)
        work = self._work(who, claim, recovered=False)
        work.read = read
        return work

    def _reclaim(self, who: str, claim: Path) -> _Work:
        """A claim left in .routing. One whose name the router did not make (an agent can
        write there too) is claimed afresh, like any outbox file."""
        msg_id, sep, _ = claim.name.partition(_CLAIM_SEP)
        if sep and len(msg_id) <= TOKEN_MAX and is_message_id(msg_id):
            return self._work(who, claim, recovered=True)
        fresh = claim.with_name(_claim_name(new_message_id(), claim.name))
        os.rename(claim, fresh)
        return self._work(who, fresh, recovered=False)

    @staticmethod
    def _work(who: str, claim: Path, *, recovered: bool) -> _Work:
        msg_id, _, source_name = claim.name.partition(_CLAIM_SEP)
        return _Work(
            who=who, claim=claim, msg_id=msg_id, source_name=source_name, recovered=recovered
        )

    def _ready(self, path: Path) -> tuple[bool, tuple[Draft, tuple[int, int, int, int]] | None]:
        """Whether to claim the file now: not while a file that does not parse may still
        be being written (or a name that is not *.json may still be renamed). A small
        file that parses comes with its draft and identity, so it is read once. Whatever
        cannot be read is claimed: its rejection says why, and waiting changes nothing."""
        if stray_reason(path.name) is not None:
            return not _young(os.lstat(path)), None
        try:
            raw, st = read_regular_stat(path, MESSAGE_FILE_MAX)
        except FileNotFoundError:
            raise
        except (OSError, UnsafeFile):
            return True, None
        draft = parse_draft(raw)
        if isinstance(draft, Rejection):
            return not _young(st), None
        return True, ((draft, _identity(st)) if st.st_size <= KEEP_READ_MAX else None)

    # --- a batch of claims ----------------------------------------------------------

    def _run_batch(self, batch: list[_Work], stats: RouteStats) -> None:
        if not batch:
            return
        try:
            for work in batch:
                self._prepare(work)
            self.hops.add([m for work in batch for m in work.messages])
            self._barrier()
            placed = [w for w in batch if self._isolated(w, stats, self._place)]
            logged = self._already_logged(placed)
            log_lines = [line for w in placed for line in self._log_lines(w, logged)]
            if log_lines:
                append_line(self.paths.log, b"\n".join(log_lines))
            archived = [w for w in placed if self._isolated(w, stats, self._archive)]
            self._barrier()
            for work in archived:
                work.claim.unlink(missing_ok=True)  # the commit point
        finally:
            # Placed copies are links of these files; the names themselves are scratch.
            for work in batch:
                for temp in work.files.values():
                    temp.unlink(missing_ok=True)

    def _prepare(self, work: _Work) -> None:
        """Decide the outcome and write its files. Whatever goes wrong with this one file
        quarantines it with the reason; only the disk's own errors stop the batch."""
        self.give_way()
        try:
            work.outcome = self._read_and_plan(work)
            self._write_temp_files(work)
        except Exception as e:
            if _is_disk_error(e):
                raise
            for temp in work.files.values():
                temp.unlink(missing_ok=True)
            work.files.clear()
            work.messages.clear()
            work.outcome = Rejection(
                f"the router could not handle it ({clean_line(repr(e))[:300]}); the person "
                "can see the file in outbox/.bad."
            )
            self._write_temp_files(work)

    def _isolated(
        self, work: _Work, stats: RouteStats, step: Callable[[_Work, RouteStats], None]
    ) -> bool:
        """Run one file's step; if it fails for a reason of its own, keep its claim for the
        next sweep (what it placed is idempotent) and let the batch go on."""
        self.give_way()
        try:
            step(work, stats)
            return True
        except Exception as e:
            if _is_disk_error(e):
                raise
            detail = f"routing {work.who}/outbox/{display_name(work.source_name)} failed: {e!r}"
            stats.errors.append(detail)
            self._office_log(clean_line(detail), stats)
            return False

    def _read_and_plan(self, work: _Work) -> RoutePlan | Rejection:
        reason = stray_reason(work.source_name)
        if reason is not None:
            return Rejection(reason)
        claim = work.claim
        try:
            st = os.lstat(claim)
        except FileNotFoundError:
            return Rejection("the file vanished while it was being routed.")
        if stat.S_ISLNK(st.st_mode):
            return Rejection(
                "the file is a symbolic link; write the message as a regular file (`hive send` does)."
            )
        if not stat.S_ISREG(st.st_mode):
            return Rejection("it is not a regular file; write the message with `hive send`.")
        too_big = check_size(st.st_size)
        if too_big:
            if st.st_size > MESSAGE_FILE_MAX:
                return replace(too_big, oversize=self._oversize(work, st))
            return too_big
        if work.read is not None and work.read[1] == _identity(st):
            return self._plan(work.who, work.msg_id, work.read[0])
        try:
            raw = read_regular(claim, MESSAGE_FILE_MAX)
        except UnsafeFile as e:
            return Rejection(f"{e} Write the message with `hive send`.")
        draft = parse_draft(raw)
        if isinstance(draft, Rejection):
            return draft
        return self._plan(work.who, work.msg_id, draft)

    def _oversize(self, work: _Work, st: os.stat_result) -> Oversize:
        """What becomes of a claim too large to be a message (decide.oversize_fate): its
        hash, read in pieces up to QUARANTINE_HASH_MAX, and whether it can be set aside."""
        folder = self.paths.run / QUARANTINE_FOLDER
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        kept = 0
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                kept += entry.stat(follow_symlinks=False).st_size
        movable = os.lstat(folder).st_dev == st.st_dev
        fate = oversize_fate(work.who, st.st_size, kept, movable=movable)
        aside = folder / f"{work.who}-{work.msg_id}"
        return Oversize(
            size=st.st_size,
            sha256=_sha256(work.claim, QUARANTINE_HASH_MAX),
            fate=fate,
            aside=str(aside.relative_to(self.paths.home)),
        )

    def _plan(self, who: str, msg_id: str, draft: Draft) -> RoutePlan | Rejection:
        parent: HopRecord | None = None
        if draft.in_reply_to is not None:
            parent = self._parent(who, draft.in_reply_to)
        return plan_route(draft, msg_id=msg_id, sender=who, parent=parent, roster=self.roster)

    def _parent(self, who: str, parent_id: str) -> HopRecord | None:
        """What a reply inherits: the office's record of the parent, if `who` received or
        sent it. The copy in `who`'s folder only proves that; its hops, thread and task
        are the agent's to edit, so they count only for mail older than the records, and
        never below zero."""
        found = find_message(self.paths.mailbox(who), parent_id)
        if found is None:
            return None
        record = self.hops.get(parent_id)
        if record is not None:
            return record
        copy = found[0]
        return HopRecord(
            id=parent_id,
            hops=max(copy.hops, 0),
            conversation=copy.conversation if is_safe_token(copy.conversation) else parent_id,
            task=copy.task if copy.task and is_safe_token(copy.task) else None,
        )

    def _messages(self, work: _Work) -> list[Message]:
        outcome = work.outcome
        if isinstance(outcome, Rejection):
            return [
                rejection_notice(
                    work.msg_id,
                    work.who,
                    work.source_name,
                    outcome.reason,
                    outcome.oversize,
                    str(self.paths.home),
                )
            ]
        assert outcome is not None
        unique = {outcome.message.id: outcome.message}
        unique.update((d.message.id, d.message) for d in outcome.deliveries)
        return list(unique.values())

    def _write_temp_files(self, work: _Work) -> None:
        """Each distinct message of the outcome, once, beside the claim."""
        work.messages = self._messages(work)
        for message in work.messages:
            temp = work.claim.parent / f"{TEMP_PREFIX}{self._token()}-{message.id}.json"
            work.files[message.id] = temp
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
            try:
                write_all(fd, _encode(message))
            finally:
                os.close(fd)

    def _token(self) -> str:
        if not self._tokens:
            pool = os.urandom(4 * 512).hex()
            self._tokens = [pool[i : i + 8] for i in range(0, len(pool), 8)]
        return self._tokens.pop()

    def _place(self, work: _Work, stats: RouteStats) -> None:
        outcome = work.outcome
        if isinstance(outcome, Rejection):
            bad = f"{work.msg_id}-bad"
            self._deliver(work.who, work.files[bad], bad, stats, fresh=not work.recovered)
            return
        assert outcome is not None
        for delivery in outcome.deliveries:
            self._deliver(
                delivery.recipient,
                work.files[delivery.message.id],
                delivery.message.id,
                stats,
                fresh=not work.recovered,
            )
        if outcome.triage is not None:
            target = self.paths.triage / f"{outcome.triage.id}.json"
            if _link(work.files[outcome.triage.id], target):
                stats.touched.add(target)

    def _deliver(
        self, recipient: str, source: Path, msg_id: str, stats: RouteStats, *, fresh: bool
    ) -> None:
        """`fresh`: the id was made by this claim, so no copy can be anywhere yet; a
        recovered claim may have been delivered, and even read, before the crash."""
        self._check_box(recipient, stats)
        box = self.paths.mailbox(recipient)
        name = f"{msg_id}.json"
        target = box.inbox / name
        # Order matters: a reader moves inbox -> .done, never back, so checking the inbox
        # first and .done second cannot miss a copy that is moving between them.
        if not fresh and (os.path.lexists(target) or os.path.lexists(box.done / name)):
            return
        if _link(source, target):
            stats.touched.add(target)
            stats.inboxes.add(recipient)

    def _already_logged(self, batch: list[_Work]) -> set[str]:
        """Recovered claims whose log line is already whole in the log's tail (a line a
        full disk cut short does not count: it is written again)."""
        wanted = {w.msg_id for w in batch if w.recovered}
        if not wanted:
            return set()
        found = set()
        for line in read_tail(self.paths.log, LOG_TAIL_BYTES).split(b"\n"):
            match = _LOG_MSG.search(line)
            if match is None or (msg := match.group(1).decode(errors="replace")) not in wanted:
                continue
            if json_depth(line) > JSON_DEPTH_MAX:
                continue
            try:
                msgspec.json.decode(line, type=LogEvent)
            except msgspec.DecodeError:
                continue
            found.add(msg)
        return found

    def _log_lines(self, work: _Work, logged: set[str]) -> list[bytes]:
        outcome = work.outcome
        event: LogEvent | None
        if isinstance(outcome, Rejection):
            event = rejection_log(work.msg_id, work.who, work.source_name, outcome.reason)
        else:
            event = outcome.log if outcome else None
        if event is None or event.msg in logged:
            return []
        return [_encode(event)]

    def _archive(self, work: _Work, stats: RouteStats) -> None:
        box = self.paths.mailbox(work.who)
        outcome = work.outcome
        if isinstance(outcome, Rejection):
            reason_file = box.bad / f"{work.msg_id}.reason"
            name, reason, oversize = (
                display_name(work.source_name),
                clean_line(outcome.reason),
                outcome.oversize,
            )
            if oversize is not None:
                text = oversize_record(name, reason, oversize, str(self.paths.home))
            else:
                text = f"{name}: {reason}\n"
            atomic_write(reason_file, text.encode(), fsync=False)
            stats.touched.add(reason_file)
            bad_file = box.bad / f"{work.msg_id}.json"
            with contextlib.suppress(FileNotFoundError):
                # The rename (or unlink) of the claim is the commit point, as below.
                if oversize is None or oversize.fate == "bad":
                    os.rename(work.claim, bad_file)
                    stats.touched.add(bad_file)
                elif oversize.fate == "aside":
                    os.rename(work.claim, self.paths.home / oversize.aside)
                else:
                    work.claim.unlink()
            stats.quarantined += 1
            stats.notes.append(("quarantine", work.who))
            return
        assert outcome is not None
        sent = box.sent / f"{work.msg_id}.json"
        _link(work.files[work.msg_id], sent)
        stats.touched.add(sent)
        stats.routed += 1
        stats.notes.append((outcome.log.kind if outcome.log else "route", work.who))
        if outcome.log is not None:
            stats.routes.append((work.who, list(outcome.log.recipients)))

    def _barrier(self) -> None:
        if self.fsync:
            sync_filesystem(self.paths.hive)

    def _report(self, stats: RouteStats) -> None:
        if stats.touched or stats.notes:
            stats.touched.add(self.paths.log)
            if self.on_change:
                self.on_change(stats)


def _sha256(path: Path, limit: int) -> str | None:
    """The file's sha256, read in pieces; None for a file over `limit` (not read)."""
    fd = open_regular(path)
    with open(fd, "rb") as f:
        if os.fstat(fd).st_size > limit:
            return None
        digest = hashlib.sha256()
        left = limit + 1
        while left > 0 and (chunk := f.read(min(left, 1 << 20))):
            digest.update(chunk)
            left -= len(chunk)
    return None if left <= 0 else digest.hexdigest()


def _young(st: os.stat_result) -> bool:
    """Modified within WRITE_GRACE_S; a time in the future says nothing and counts as old."""
    return 0 <= time.time() - st.st_mtime < WRITE_GRACE_S


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """Which file, in which state: a rename keeps all four, a write changes the last."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _is_disk_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS


def _claim_name(msg_id: str, name: str) -> str:
    """`<id>~<name>`, keeping only the end of a long name (its extension is what counts)."""
    tail = os.fsencode(name)[-CLAIM_NAME_BYTES:]
    return f"{msg_id}{_CLAIM_SEP}{os.fsdecode(tail)}"


def _link(source: Path, target: Path) -> bool:
    """Put `source`'s file at `target` unless something is already there."""
    try:
        os.link(source, target, follow_symlinks=False)
        return True
    except FileExistsError:
        return False


def _entries_names(folder: Path) -> list[str]:
    """Every name in a folder but dotfiles (temp files, the office's own folders)."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    return [n for n in names if not is_temp_name(n)]


def _entries(folder: Path) -> list[Path]:
    return [folder / n for n in _entries_names(folder)]


def _remove_temp_files(folder: Path) -> None:
    """Only call on folders no one but this process writes (the office lock holds)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(TEMP_PREFIX):
            (folder / name).unlink(missing_ok=True)
