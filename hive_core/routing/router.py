"""The router's effects: claim outbox files, deliver, archive, log.

Exactly once, by construction. Each file goes through these steps, and each step is
either atomic or idempotent, so a crash between any two of them is repaired by simply
running the remaining steps again at start-up:

1. claim: rename `outbox/<name>.json` to `outbox/.routing/<id>.json`. The rename is the
   moment the id is chosen; from then on the id is fixed by the file name, and every
   file derived from the message (deliveries, notices, triage, archive) is named by it.
2. deliver: link a complete temp file to `inbox/<id>.json` in each recipient's inbox,
   unless the inbox or `inbox/.done/` already has that id (a crash after delivery, or a
   recipient that already read it). link(2) never overwrites, so no second copy.
3. log: append the outcome line, unless this is a recovered claim whose line is already
   in the tail of log.jsonl.
4. archive: write the normalised message to `outbox/.sent/<id>.json` (or move the raw
   file to `outbox/.bad/` with a `.reason`), then drop the claim. The claim's removal is
   the commit point.

Only the office process runs a router (the office lock guarantees one), so no two
routers race over a claim.
"""

from __future__ import annotations

import contextlib
import os
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
    write_new,
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

    # --- scanning -------------------------------------------------------------------

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
            routing = self.paths.mailbox(who).routing
            for claimed in _claims(routing):
                self._process(who, claimed, stats, recovered=True)
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

    def _scan(self, who: str, stats: RouteStats) -> None:
        box = self.paths.mailbox(who)
        for path in _json_files(box.outbox):
            self._route_file(who, path, stats)

    # --- one file -------------------------------------------------------------------

    def _route_file(self, who: str, path: Path, stats: RouteStats) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISREG(st.st_mode) and not self._ready(path, st):
            self.deferred.add(path)
            stats.deferred += 1
            return
        self.deferred.discard(path)
        # The claim's name carries the id and the original name (for the sender's notice).
        claimed = (
            self.paths.mailbox(who).routing / f"{new_message_id()}{_CLAIM_SEP}{path.name[-150:]}"
        )
        claimed.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return
        stats.touched.add(path)
        self._process(who, claimed, stats, recovered=False)

    def _ready(self, path: Path, st: os.stat_result) -> bool:
        """False while a file that does not parse may still be being written."""
        if time.time() - st.st_mtime >= WRITE_GRACE_S:
            return True
        if check_size(st.st_size) is not None and st.st_size != 0:
            return True  # oversize: no amount of waiting helps
        try:
            raw = path.read_bytes()
        except OSError:
            return True
        return not isinstance(parse_draft(raw), Rejection)

    def _process(self, who: str, claimed: Path, stats: RouteStats, *, recovered: bool) -> None:
        msg_id, _, source_name = claimed.name.partition(_CLAIM_SEP)
        box = self.paths.mailbox(who)
        outcome = self._read_and_plan(who, msg_id, claimed)
        if isinstance(outcome, Rejection):
            self._quarantine(who, msg_id, claimed, outcome.reason, stats, recovered, source_name)
            return
        plan = outcome
        for delivery in plan.deliveries:
            self._deliver(delivery.recipient, delivery.message, stats)
        if plan.triage is not None:
            triage_file = self.paths.triage / f"{plan.triage.id}.json"
            self.paths.triage.mkdir(exist_ok=True)
            write_new(triage_file, _encode(plan.triage), fsync=self.fsync)
            stats.touched.add(triage_file)
        if plan.log is not None:
            self._log(plan.log, recovered)
        sent = box.sent / f"{msg_id}.json"
        sent.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(sent, _encode(plan.message), fsync=self.fsync)
        claimed.unlink(missing_ok=True)
        stats.touched.add(sent)
        stats.routed += 1
        kind = plan.log.kind if plan.log else "route"
        stats.notes.append((kind, who))

    def _read_and_plan(self, who: str, msg_id: str, claimed: Path) -> RoutePlan | Rejection:
        try:
            st = os.lstat(claimed)
        except FileNotFoundError:
            return Rejection("the file vanished while it was being routed.")
        if stat.S_ISLNK(st.st_mode):
            return Rejection(
                "the file is a symbolic link; write the message as a regular file "
                "(`hive send` does)."
            )
        if not stat.S_ISREG(st.st_mode):
            return Rejection("it is not a regular file; write the message with `hive send`.")
        too_big = check_size(st.st_size)
        if too_big:
            return too_big
        with open(claimed, "rb") as f:
            raw = f.read(st.st_size + 1)
        draft = parse_draft(raw)
        if isinstance(draft, Rejection):
            return draft
        return self._plan(who, msg_id, draft)

    def _plan(self, who: str, msg_id: str, draft: Draft) -> RoutePlan | Rejection:
        parent: Message | None = None
        if draft.in_reply_to is not None:
            found = find_message(self.paths.mailbox(who), draft.in_reply_to)
            parent = found[0] if found else None
        return plan_route(draft, msg_id=msg_id, sender=who, parent=parent, floor=self.floor)

    def _deliver(self, recipient: str, message: Message, stats: RouteStats) -> None:
        box = self.paths.mailbox(recipient)
        name = f"{message.id}.json"
        target = box.inbox / name
        # Order matters: a reader moves inbox -> .done, never back, so checking the inbox
        # first and .done second cannot miss a copy that is moving between them.
        if target.exists() or (box.done / name).exists():
            return
        box.inbox.mkdir(parents=True, exist_ok=True)
        if write_new(target, _encode(message), fsync=self.fsync):
            stats.touched.add(target)

    def _quarantine(
        self,
        who: str,
        msg_id: str,
        claimed: Path,
        reason: str,
        stats: RouteStats,
        recovered: bool,
        source_name: str,
    ) -> None:
        box = self.paths.mailbox(who)
        reason_file = box.bad / f"{msg_id}.reason"
        self._deliver(who, rejection_notice(msg_id, who, source_name, reason), stats)
        self._log(rejection_log(msg_id, who, source_name, reason), recovered)
        box.bad.mkdir(parents=True, exist_ok=True)
        atomic_write(reason_file, f"{source_name}: {reason}\n".encode(), fsync=self.fsync)
        bad_file = box.bad / f"{msg_id}.json"
        with contextlib.suppress(FileNotFoundError):
            os.rename(claimed, bad_file)
        stats.touched.update({reason_file, bad_file})
        stats.quarantined += 1
        stats.notes.append(("quarantine", who))

    def _log(self, event: LogEvent, recovered: bool) -> None:
        line = _encode(event)
        if (
            recovered
            and event.msg
            and f'"msg":"{event.msg}"'.encode() in read_tail(self.paths.log, LOG_TAIL_BYTES)
        ):
            return
        append_line(self.paths.log, line)

    def _report(self, stats: RouteStats) -> None:
        if stats.touched or stats.notes:
            stats.touched.add(self.paths.log)
            if self.on_change:
                self.on_change(stats)


def _json_files(folder: Path) -> Iterable[Path]:
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
