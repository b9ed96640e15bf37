"""Keys from an attached client make the office's bulk work give way (hive_core/pace.py,
issue 25: keystroke echo while 2,000 messages route): a burst routed while the person
types rests between slices, and every message is still delivered exactly once; the same
burst with no one typing never rests."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from hive_core.cli import hive
from hive_core.clients.protocol import Hello, Input, Welcome, encode, office_reader
from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.paths import HivePaths
from tests.support import until

WAIT_S = 60.0  # a guard against a hang only; nothing here is timed
BURST = 400
KEY_EVERY_S = 0.1


def _office(root: Path) -> Office:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\ncwd = "{root}"\n'
        "command = ['sh']\n"
    )
    init_office(paths)
    return Office(paths, agents=False, program=hive)


def _drop_burst(paths: HivePaths) -> None:
    """What an agent's CLI does, BURST times: a draft written aside, renamed in."""
    outbox = paths.mailbox("human").outbox
    for i in range(BURST):
        draft = {"to": "michael", "subject": f"burst {i}", "body": f"message {i}"}
        temp = outbox / f".tmp-{i}"
        temp.write_text(json.dumps(draft))
        os.rename(temp, outbox / f"m{i:04d}.json")


def _subjects(paths: HivePaths) -> list[str]:
    inbox = paths.mailbox("michael").inbox
    return [json.loads(p.read_bytes())["subject"] for p in inbox.glob("*.json")]


@pytest.mark.parametrize("typing", [True, False])
async def test_a_burst_gives_way_while_the_person_types(short_tmp: Path, typing: bool) -> None:
    office = _office(short_tmp)
    paths = office.paths
    stop = asyncio.Event()
    run = asyncio.create_task(office.run(stop))
    keys: asyncio.Task[None] | None = None
    try:
        await until(None, paths.client_socket.exists, "the office to listen for clients", WAIT_S)
        reader, writer = await asyncio.open_unix_connection(str(paths.client_socket))
        writer.write(encode(Hello(version=1, pid=os.getpid(), term_cols=80, term_rows=24)))
        frames = office_reader()
        welcomed = False
        while not welcomed:
            data = await reader.read(1 << 16)
            assert data, "the office closed the client before its welcome"
            welcomed = any(isinstance(m, Welcome) for m in frames.feed(data))

        async def type_along() -> None:
            while True:
                writer.write(encode(Input(agent="michael", data=b"x")))
                await asyncio.sleep(KEY_EVERY_S)

        if typing:
            keys = asyncio.create_task(type_along())
            await until(None, office.pace.typing, "the office to see the person type", WAIT_S)
        _drop_burst(paths)
        await until(
            None, lambda: len(_subjects(paths)) >= BURST, "the burst to be delivered", WAIT_S
        )
        await asyncio.sleep(0.5)  # a copy too many would have landed by now

        subjects = _subjects(paths)
        assert sorted(subjects) == sorted(f"burst {i}" for i in range(BURST))
        if typing:
            assert office.pace.rested_s > 0
        else:
            assert not office.pace.typing()
            assert office.pace.rested_s == 0
        writer.close()
    finally:
        if keys is not None:
            keys.cancel()
        stop.set()
        await asyncio.wait_for(run, WAIT_S)
