"""The router's effects: claim outbox files, deliver, log, archive.

Exactly once, by construction. Each file goes through these steps, and each step is
either atomic or idempotent, so a crash between any two of them is repaired by simply
running the remaining steps again at start-up:

1. claim: rename `outbox/<name>.json` to `outbox/.routing/<id>~<name>`. The rename is
   the moment the id is chosen; from then on the id is fixed by the file name, and
   every file derived from the message (deliveries, notices, triage, archive) is named
   by it.
2. deliver: write the message once to a temp file, then link(2) it to `inbox/<id>.json`
   of each recipient, unless that inbox or its `.done/` already has the id (a crash
   after delivery, or a reader that already finished with it). link never overwrites,
   so there is never a second copy.
3. log: append the outcome line, unless this is a recovered claim whose line is already
   in the tail of log.jsonl.
4. archive: link the same file to `outbox/.sent/<id>.json` (or move the raw file to
   `outbox/.bad/` with a `.reason`), then drop the claim. Dropping the claim is the
   commit point.

Files are handled in batches (everything waiting in one outbox): the data of a whole
batch is made durable with one filesystem sync before it is linked into place, and
the links with another before the claims go, instead of an fsync per file. A message's
archive and its recipients' copies are hard links of one file (they are the same
bytes; readers only ever rename them, never write into them).

Only the office process runs a router (the office lock guarantees one), so no two
routers race over a claim.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from hive_core.fsio import (
    TEMP_PREFIX,
    append_line,
    atomic_write,
    is_temp_name,
    read_tail,
    sync_filesystem,
)
from hive_core.ids import new_message_id
from hive_core.mail import find_message
from hive_core.paths import HivePaths
from hive_core.routing.decide import (
    Floor,
    Rejection,
    RoutePlan,
    check_size,
    parse_draft,
    plan_route,
    rejection_log,
    rejection_notice,
)
from hive_core.schema import Draft, LogEvent, Message

# A hand-written file that does not parse yet may still be being written by a program
# that does not write atomically: give it this long before quarantining it.
WRITE_GRACE_S = 2.0
# How much of log.jsonl's end to search when recovering a claim (its line, if written,
# is among the last few thousand).
LOG_TAIL_BYTES = 1 << 20
# Claims handled per batch: bounds how long one pass holds the loop.
BATCH_MAX = 256

_encode = msgspec.json.Encoder().encode
# Claim file names: `<id>~<original name>`; ids never contain '~'.
_CLAIM_SEP = "~"


@dataclass
class RouteStats:
    routed: int = 0
    quarantined: int = 0
    deferred: int = 0
    touched: set[Path] = field(default_factory=set)
    notes: list[tuple[str, str]] = field(default_factory=list)
    # (sender, recipients) of each routed message, for whoever shows mail moving.
    routes: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass
class _Work:
    """One claim on its way through a batch."""

    who: str
    claim: Path
    msg_id: str
    source_name: str
    recovered: bool
    outcome: RoutePlan | Rejection | None = None
    # The bytes each message of the outcome is written from, by message id.
    files: dict[str, Path] = field(default_factory=dict)


class Router:
    def __init__(
        self,
        paths: HivePaths,
        floor: Floor,
        *,
        on_change: Callable[[RouteStats], None] | None = None,
        fsync: bool = True,
    ) -> None:
        self.paths = paths
        self.floor = floor
        self.fsync = fsync
        self.on_change = on_change
        # Files that failed to parse while young: retried after WRITE_GRACE_S.
        self.deferred: set[Path] = set()

    # --- entry points ---------------------------------------------------------------

    def senders(self) -> list[str]:
        return sorted(self.floor.senders())

    def recover(self) -> RouteStats:
        """At start-up: sweep the temp files a crash left in folders only the office
        writes, and finish every claim a previous run left behind."""
        for who in self.senders():
            box = self.paths.mailbox(who)
            for folder in (box.inbox, box.sent, box.bad, box.routing):
                _remove_temp_files(folder)
        _remove_temp_files(self.paths.triage)
        return self.finish_claims()

    def finish_claims(self) -> RouteStats:
        """Finish claims whose routing was interrupted (a crash between steps)."""
        stats = RouteStats()
        for who in self.senders():
            claims = [
                self._work(who, c, recovered=True) for c in _claims(self.paths.mailbox(who).routing)
            ]
            for start in range(0, len(claims), BATCH_MAX):
                self._run_batch(claims[start : start + BATCH_MAX], stats)
        self._report(stats)
        return stats

    def scan_all(self) -> RouteStats:
        stats = RouteStats()
        for who in self.senders():
            self._scan(who, stats)
        self._report(stats)
        return stats

    def scan(self, who: str) -> RouteStats:
        stats = RouteStats()
        if who in self.floor.senders():
            self._scan(who, stats)
        self._report(stats)
        return stats

    def post(self, recipient: str, message: Message) -> None:
        """Deliver a message the office itself writes (a standup, a notice): straight into
        the inbox, logged like routed mail."""
        box = self.paths.mailbox(recipient)
        box.inbox.mkdir(parents=True, exist_ok=True)
        target = box.inbox / f"{message.id}.json"
        atomic_write(target, _encode(message), fsync=self.fsync)
        event = LogEvent(ts=message.created_at, kind="office", msg=message.id, sender=message.sender,
                         to=recipient, recipients=[recipient], act=message.act, subject=message.subject)
        append_line(self.paths.log, _encode(event))
        stats = RouteStats(touched={target}, notes=[("office", recipient)], routes=[(message.sender, [recipient])])
        self._report(stats)

    # --- claiming -------------------------------------------------------------------

    def _scan(self, who: str, stats: RouteStats) -> None:
        files = _json_files(self.paths.mailbox(who).outbox)
        for start in range(0, len(files), BATCH_MAX):
            batch = [
                w for p in files[start : start + BATCH_MAX] if (w := self._claim(who, p, stats))
            ]
            self._run_batch(batch, stats)

    def _claim(self, who: str, path: Path, stats: RouteStats) -> _Work | None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISREG(st.st_mode) and not self._ready(path, st):
            self.deferred.add(path)
            stats.deferred += 1
            return None
        self.deferred.discard(path)
        routing = self.paths.mailbox(who).routing
        claim = routing / f"{new_message_id()}{_CLAIM_SEP}{path.name[-150:]}"
        routing.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(path, claim)
        except FileNotFoundError:
            return None
        stats.touched.add(path)
        return self._work(who, claim, recovered=False)

    @staticmethod
    def _work(who: str, claim: Path, *, recovered: bool) -> _Work:
        msg_id, _, source_name = claim.name.partition(_CLAIM_SEP)
        return _Work(
            who=who, claim=claim, msg_id=msg_id, source_name=source_name, recovered=recovered
        )

    def _ready(self, path: Path, st: os.stat_result) -> bool:
        """False while a file that does not parse may still be being written."""
        if time.time() - st.st_mtime >= WRITE_GRACE_S:
            return True
        if st.st_size > 0 and check_size(st.st_size) is not None:
            return True  # oversize: no amount of waiting helps
        try:
            raw = path.read_bytes()
        except OSError:
            return True
        return not isinstance(parse_draft(raw), Rejection)

    # --- a batch of claims ----------------------------------------------------------

    def _run_batch(self, batch: list[_Work], stats: RouteStats) -> None:
        if not batch:
            return
        for work in batch:
            work.outcome = self._read_and_plan(work)
            self._write_temp_files(work)
        self._barrier()
        log_lines: list[bytes] = []
        for work in batch:
            self._place(work, stats)
            log_lines.extend(self._log_lines(work))
        if log_lines:
            append_line(self.paths.log, b"\n".join(log_lines))
        for work in batch:
            self._archive(work, stats)
        self._barrier()
        for work in batch:
            work.claim.unlink(missing_ok=True)  # the commit point
            for temp in work.files.values():
                temp.unlink(missing_ok=True)

    def _read_and_plan(self, work: _Work) -> RoutePlan | Rejection:
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
            return too_big
        with open(claim, "rb") as f:
            raw = f.read(st.st_size + 1)
        draft = parse_draft(raw)
        if isinstance(draft, Rejection):
            return draft
        return self._plan(work.who, work.msg_id, draft)

    def _plan(self, who: str, msg_id: str, draft: Draft) -> RoutePlan | Rejection:
        parent: Message | None = None
        if draft.in_reply_to is not None:
            found = find_message(self.paths.mailbox(who), draft.in_reply_to)
            parent = found[0] if found else None
        return plan_route(draft, msg_id=msg_id, sender=who, parent=parent, floor=self.floor)

    def _messages(self, work: _Work) -> list[Message]:
        outcome = work.outcome
        if isinstance(outcome, Rejection):
            return [rejection_notice(work.msg_id, work.who, work.source_name, outcome.reason)]
        assert outcome is not None
        unique = {outcome.message.id: outcome.message}
        unique.update((d.message.id, d.message) for d in outcome.deliveries)
        return list(unique.values())

    def _write_temp_files(self, work: _Work) -> None:
        """Each distinct message of the outcome, once, beside the claim."""
        for message in self._messages(work):
            temp = work.claim.parent / f"{TEMP_PREFIX}{secrets.token_hex(4)}-{message.id}.json"
            with open(temp, "xb") as f:
                f.write(_encode(message))
            work.files[message.id] = temp

    def _place(self, work: _Work, stats: RouteStats) -> None:
        outcome = work.outcome
        if isinstance(outcome, Rejection):
            self._deliver(work.who, work.files[f"{work.msg_id}-bad"], f"{work.msg_id}-bad", stats)
            return
        assert outcome is not None
        for delivery in outcome.deliveries:
            self._deliver(
                delivery.recipient, work.files[delivery.message.id], delivery.message.id, stats
            )
        if outcome.triage is not None:
            self.paths.triage.mkdir(exist_ok=True)
            target = self.paths.triage / f"{outcome.triage.id}.json"
            if _link(work.files[outcome.triage.id], target):
                stats.touched.add(target)

    def _deliver(self, recipient: str, source: Path, msg_id: str, stats: RouteStats) -> None:
        box = self.paths.mailbox(recipient)
        name = f"{msg_id}.json"
        target = box.inbox / name
        # Order matters: a reader moves inbox -> .done, never back, so checking the inbox
        # first and .done second cannot miss a copy that is moving between them.
        if target.exists() or (box.done / name).exists():
            return
        box.inbox.mkdir(parents=True, exist_ok=True)
        if _link(source, target):
            stats.touched.add(target)

    def _log_lines(self, work: _Work) -> list[bytes]:
        outcome = work.outcome
        event: LogEvent | None
        if isinstance(outcome, Rejection):
            event = rejection_log(work.msg_id, work.who, work.source_name, outcome.reason)
        else:
            event = outcome.log if outcome else None
        if event is None:
            return []
        if work.recovered and f'"msg":"{event.msg}"'.encode() in read_tail(
            self.paths.log, LOG_TAIL_BYTES
        ):
            return []
        return [_encode(event)]

    def _archive(self, work: _Work, stats: RouteStats) -> None:
        box = self.paths.mailbox(work.who)
        outcome = work.outcome
        if isinstance(outcome, Rejection):
            box.bad.mkdir(parents=True, exist_ok=True)
            reason_file = box.bad / f"{work.msg_id}.reason"
            atomic_write(
                reason_file, f"{work.source_name}: {outcome.reason}\n".encode(), fsync=False
            )
            bad_file = box.bad / f"{work.msg_id}.json"
            with contextlib.suppress(FileNotFoundError):
                os.rename(work.claim, bad_file)
            stats.touched.update({reason_file, bad_file})
            stats.quarantined += 1
            stats.notes.append(("quarantine", work.who))
            return
        assert outcome is not None
        box.sent.mkdir(parents=True, exist_ok=True)
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


def _link(source: Path, target: Path) -> bool:
    """Put `source`'s file at `target` unless something is already there."""
    try:
        os.link(source, target)
        return True
    except FileExistsError:
        return False


def _json_files(folder: Path) -> list[Path]:
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    return [folder / n for n in names if n.endswith(".json") and not is_temp_name(n)]


def _claims(folder: Path) -> Iterable[Path]:
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    return [folder / n for n in names if _CLAIM_SEP in n and not is_temp_name(n)]


def _remove_temp_files(folder: Path) -> None:
    """Only call on folders no one but this process writes (the office lock holds)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(TEMP_PREFIX):
            (folder / name).unlink(missing_ok=True)
