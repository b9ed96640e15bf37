"""The office's loop (which carries the person's keystrokes to the panes and their echo
back) does not wait on the mail a routing burst delivers (issue 25: keystroke echo while
2,000 messages route). The unread index reads files outside its lock, so a hook or tick
on the loop never waits while the route thread reads a burst's inboxes; and while a
pass runs, what it delivered is read into the index on a worker, not by the loop."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any, cast

import msgspec

from hive_core.events import unread
from hive_core.events.unread import UnreadIndex
from hive_core.office.routes import RouteDriver
from hive_core.paths import HivePaths
from hive_core.schema import Message

WAIT_S = 30.0  # a guard against a hang only; nothing here is timed


def message_bytes(n: int, subject: str = "hello") -> bytes:
    mid = f"20260101T000000{n:06d}Z-aaaaaa"
    return msgspec.json.encode(
        Message(
            id=mid,
            conversation=mid,
            in_reply_to=None,
            sender="pam",
            to="jim",
            act="request",
            subject=subject,
            body="b",
            created_at="2026-01-01T00:00:00Z",
        )
    )


def deliver(inbox: Path, first: int, count: int) -> None:
    """Whole files only, as the router writes them (a reader never sees one half
    written)."""
    for n in range(first, first + count):
        part = inbox / f"part-{n}"
        part.write_bytes(message_bytes(n))
        os.rename(part, inbox / f"20260101T000000{n:06d}Z-aaaaaa.json")


def test_a_reader_never_waits_while_another_thread_reads_a_burst(
    tmp_path: Path, monkeypatch: Any
) -> None:
    paths = HivePaths(tmp_path / "home")
    inbox = paths.mailbox("jim").inbox
    inbox.mkdir(parents=True)
    skipped: list[tuple[str, str, str]] = []
    index = UnreadIndex(paths, skipped=lambda *a: skipped.append(a))
    deliver(inbox, 0, 50)
    (inbox / "20260101T000000999999Z-broken.json").write_bytes(b"not json")

    summary = unread._summary
    locked_while_reading: list[bool] = []
    entered, release = threading.Event(), threading.Event()
    route_thread: list[threading.Thread] = []

    def watched(path: str, name: str) -> Any:
        locked_while_reading.append(index._lock.locked())
        if route_thread and threading.current_thread() is route_thread[0]:
            entered.set()
            assert release.wait(WAIT_S)
        return summary(path, name)

    monkeypatch.setattr(unread, "_summary", watched)
    # "The route thread" stops inside its first read of the burst's files.
    reader = threading.Thread(target=index.unread, args=("jim",))
    route_thread.append(reader)
    reader.start()
    assert entered.wait(WAIT_S)
    # The loop asks meanwhile: it gets every message now, not after the other read.
    seen = index.unread("jim")
    release.set()
    reader.join(WAIT_S)
    assert not reader.is_alive()
    assert len(seen) == 50
    assert [m.id for m in index.unread("jim")] == [m.id for m in seen]
    # No file was read under the lock, and the broken one was told of once, though two
    # threads read it.
    assert locked_while_reading and not any(locked_while_reading)
    assert [name for _, name, _ in skipped] == ["20260101T000000999999Z-broken.json"]


def test_a_route_pass_delivery_is_read_by_a_worker_while_the_pass_runs(
    tmp_path: Path, monkeypatch: Any
) -> None:
    paths = HivePaths(tmp_path / "home")
    inbox = paths.mailbox("jim").inbox
    inbox.mkdir(parents=True)
    index = UnreadIndex(paths, skipped=lambda *a: None)
    driver = RouteDriver(
        paths,
        cast(Any, None),
        cast(Any, None),
        cast(Any, None),
        index,
        cast(Any, {"jim": None}),
        routed=[],
        hive=[],
        tell=lambda *a: None,
        poke=lambda: None,
        office_log=lambda line: None,
        log_event=lambda event: None,
        health=cast(Any, None),
    )
    summary = unread._summary
    readers: list[threading.Thread] = []

    def watched(path: str, name: str) -> Any:
        readers.append(threading.current_thread())
        return summary(path, name)

    monkeypatch.setattr(unread, "_summary", watched)
    delivered, finish = threading.Event(), threading.Event()

    def route_pass() -> None:
        """A pass that delivers a burst, then goes on until the index has read it."""
        deliver(inbox, 0, 300)
        delivered.set()
        assert finish.wait(WAIT_S)

    async def scenario() -> threading.Thread:
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(driver.thread, route_pass)
        along = asyncio.create_task(driver._read_along(running))
        await asyncio.to_thread(delivered.wait, WAIT_S)
        # The index gets the burst while the pass still runs, read off the loop.
        while len(index._boxes.get("jim", unread._Box()).items) < 300:
            await asyncio.sleep(0.01)
        finish.set()
        await along
        await running
        return threading.current_thread()

    try:
        loop_thread = asyncio.run(asyncio.wait_for(scenario(), WAIT_S))
    finally:
        finish.set()
        driver.thread.shutdown()
    assert len(readers) == 300
    assert loop_thread not in readers
    assert not any(t.name.startswith("route") for t in readers)
    # The loop then asks: nothing is left for it to read.
    before = len(readers)
    assert len(index.unread("jim")) == 300
    assert len(readers) == before


def test_a_watched_inbox_is_not_listed_again_and_stays_exact(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """After its first listing an inbox is watched: deliveries, a message done, one
    replaced and the folder replaced whole are each seen at the next question, and only
    the last lists the folder (a burst's inbox holds thousands of names)."""
    paths = HivePaths(tmp_path / "home")
    inbox = paths.mailbox("jim").inbox
    inbox.mkdir(parents=True)
    index = UnreadIndex(paths, skipped=lambda *a: None)
    deliver(inbox, 0, 100)
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: Any) -> Any:
        listed.append(str(path))
        return scandir(path)

    monkeypatch.setattr(unread.os, "scandir", counting)
    assert len(index.unread("jim")) == 100
    assert len(listed) == 1

    deliver(inbox, 100, 50)
    assert [m.id for m in index.unread("jim")][-1] == "20260101T000000000149Z-aaaaaa"
    first = inbox / "20260101T000000000000Z-aaaaaa.json"
    first.unlink()  # done
    part = inbox / ".part"
    part.write_bytes(message_bytes(1, subject="replaced"))
    os.rename(part, inbox / "20260101T000000000001Z-aaaaaa.json")
    seen = index.unread("jim")
    assert len(seen) == 149 and seen[0].subject == "replaced"
    assert len(listed) == 1

    os.rename(inbox, inbox.with_name("inbox.old"))
    inbox.mkdir()
    deliver(inbox, 500, 2)
    assert [m.id for m in index.unread("jim")] == [
        "20260101T000000000500Z-aaaaaa",
        "20260101T000000000501Z-aaaaaa",
    ]
    assert len(listed) == 2
    index.close()
