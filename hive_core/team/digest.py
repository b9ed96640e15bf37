"""The manager's floor view (office.toml `manager_watch = "digest"`): every
`manager_digest_every_s` the manager gets one message that says who wrote to whom on
the floor since the last one, and which requests and questions have waited longer than
`manager_digest_open_after_s` for an answer.

Only the log's routing lines and the office's own thread records are read: counts,
ids, acts and subjects, never a body. The digest is mail to the manager alone, and its
id marks it as mail that waits for the manager's next turn: the wake path never types a
nudge for it (wake.QUIET_SUFFIX), and nobody else's inbox or wake state is touched.

`fold` and `compose` are pure; `DigestWatch` is the office's loop around them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import msgspec

from hive_core.ids import new_message_id
from hive_core.logfile import LogFollower
from hive_core.paths import HivePaths
from hive_core.routing.rules import router_notice
from hive_core.schema import REPLY_OBLIGING_ACTS, HopRecord, LogEvent, Message, OfficeConfig
from hive_core.team.wake import QUIET_SUFFIX
from hive_core.text import one_line

# A digest lists at most this many waiting requests (the oldest); the rest are counted.
OPEN_SHOWN = 20
SUBJECT_SHOWN = 60
# Requests remembered as waiting, newest kept: a long-running office forgets the oldest.
WAITING_MAX = 2000


@dataclass(frozen=True)
class Routed:
    """One message the router delivered, as the log and the thread records say."""

    id: str
    at: datetime
    sender: str
    recipients: tuple[str, ...]
    act: str
    subject: str
    conversation: str


@dataclass(frozen=True)
class DigestMemory:
    """What the digest remembers between two digests."""

    # Messages per (sender, recipient) since the last digest.
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    # Requests, proposals and questions between peers that nobody answered yet, by id.
    waiting: dict[str, Routed] = field(default_factory=dict)
    # Waiting ids some digest already listed as overdue.
    reported: frozenset[str] = frozenset()


def routed_of(line: bytes, thread_of: Callable[[str], HopRecord | None]) -> Routed | None:
    """A log line that records a delivery, with its thread; None for any other line."""
    try:
        event = msgspec.json.decode(line, type=LogEvent)
        if event.kind != "route" or not event.msg or not event.sender:
            return None
        at = datetime.fromisoformat(event.ts)
    except (msgspec.DecodeError, ValueError):
        return None
    record = thread_of(event.msg)
    return Routed(
        id=event.msg,
        at=at,
        sender=event.sender,
        recipients=tuple(event.recipients),
        act=event.act or "inform",
        subject=event.subject or "",
        conversation=record.conversation if record else event.msg,
    )


def fold(watch: DigestMemory, routed: Iterable[Routed], peers: frozenset[str]) -> DigestMemory:
    """Add delivered messages to the watch. Only traffic between peers (agents other
    than the manager) is the floor's: the manager sees its own mail, and the person's
    and the office's are not the team talking."""
    counts = dict(watch.counts)
    waiting = dict(watch.waiting)
    threads: dict[str, list[str]] = {}
    for wid, asked in waiting.items():
        threads.setdefault(asked.conversation, []).append(wid)
    for message in routed:
        if message.sender not in peers:
            continue
        # An answer is mail in the same thread from someone it asked.
        for wid in threads.get(message.conversation, []):
            if wid in waiting and message.sender in waiting[wid].recipients:
                del waiting[wid]
        to = tuple(r for r in message.recipients if r in peers and r != message.sender)
        for recipient in to:
            counts[(message.sender, recipient)] = counts.get((message.sender, recipient), 0) + 1
        if to and message.act in REPLY_OBLIGING_ACTS:
            waiting[message.id] = replace(message, recipients=to)
            threads.setdefault(message.conversation, []).append(message.id)
    if len(waiting) > WAITING_MAX:
        waiting = dict(sorted(waiting.items(), key=lambda kv: kv[1].at)[-WAITING_MAX:])
    return DigestMemory(counts=counts, waiting=waiting, reported=watch.reported & waiting.keys())


def compose(
    watch: DigestMemory, now: datetime, open_after_s: float
) -> tuple[str | None, DigestMemory]:
    """The digest's text (None: nothing new to say) and the watch after sending it.
    Said when there was traffic since the last one, or a request became overdue."""
    overdue = sorted(
        (w for w in watch.waiting.values() if (now - w.at).total_seconds() >= open_after_s),
        key=lambda w: w.at,
    )
    newly = {w.id for w in overdue} - watch.reported
    after = DigestMemory(waiting=watch.waiting, reported=watch.reported | newly)
    if not watch.counts and not newly:
        return None, after
    total = sum(watch.counts.values())
    lines = [f"Floor traffic since the last digest: {total} message{'s' if total != 1 else ''}."]
    for (sender, recipient), n in sorted(watch.counts.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"- {sender} -> {recipient}: {n}")
    questions = [w for w in overdue if w.act == "query"]
    requests = [w for w in overdue if w.act != "query"]
    for title, items in (("Requests", requests), ("Questions", questions)):
        if not items:
            continue
        lines.append(f"{title} with no answer for {open_after_s:g} s or more: {len(items)}")
        for w in items[:OPEN_SHOWN]:
            waited = int((now - w.at).total_seconds() // 60)
            subject = one_line(w.subject, SUBJECT_SHOWN) or "(no subject)"
            lines.append(
                f"- {w.id} {w.sender} -> {', '.join(w.recipients)} ({w.act}, {waited} min): "
                f"{subject}"
            )
        if len(items) > OPEN_SHOWN:
            lines.append(f"- and {len(items) - OPEN_SHOWN} more")
    lines.append(
        "Bodies are not copied here; ask the agents. This digest does not wake anyone "
        '(office.toml manager_watch = "off" stops it).'
    )
    return "\n".join(lines), after


def digest_notice(manager: str, text: str) -> Message:
    """The digest as office mail; its id tells the wake path not to nudge for it."""
    notice_id = f"{new_message_id()}{QUIET_SUFFIX}"
    return router_notice(notice_id, manager, "Floor digest", text)


class DigestWatch:
    """The office's loop: every interval, the log's new routing lines are folded in and a
    digest, if there is one, is posted to the manager."""

    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        *,
        thread_of: Callable[[str], HopRecord | None],
        post: Callable[[str, Message], None],
    ) -> None:
        self.config = config
        self.thread_of = thread_of
        self.post = post
        # From now on: what happened before the office started was someone else's watch.
        self.follower = LogFollower(paths)
        self.watch = DigestMemory()

    def peers(self) -> frozenset[str]:
        # The roster as it is now (a hire joins the floor).
        manager = self.config.office.manager
        return frozenset(a.id for a in self.config.agents if a.id != manager)

    def tick(self, now: datetime) -> Message | None:
        """One pass (reads the log: off the loop): the digest to post, or None."""
        lines = self.follower.read()
        routed = (r for line in lines if (r := routed_of(line, self.thread_of)) is not None)
        self.watch = fold(self.watch, routed, self.peers())
        text, self.watch = compose(self.watch, now, self.config.office.manager_digest_open_after_s)
        return None if text is None else digest_notice(self.config.office.manager, text)

    async def run(self, stop: asyncio.Event) -> None:
        every = self.config.office.manager_digest_every_s
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
            if stop.is_set():
                return
            notice = await asyncio.to_thread(self.tick, datetime.now(UTC))
            if notice is not None:
                self.post(notice.to, notice)
