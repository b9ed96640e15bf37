"""While an office runs, its process switches threads every SWITCH_INTERVAL_S (issue 25,
keystroke echo while 2,000 messages route): the loop that echoes the person's keys gets
the interpreter back sooner from the route, commit and memory threads. A program that
hosts the office and goes on (the app, a test) gets its own interval back when the run
ends, however it ends."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.office.wiring import SWITCH_INTERVAL_S
from hive_core.paths import HivePaths

WAIT_S = 30.0  # a guard against a hang only; nothing here is timed
HOSTS_OWN = 0.004  # the host's interval: longer than the office's, and not the default


@pytest.fixture
def host_interval() -> Iterator[None]:
    was = sys.getswitchinterval()
    sys.setswitchinterval(HOSTS_OWN)
    try:
        yield
    finally:
        sys.setswitchinterval(was)


async def _until_listening(paths: HivePaths) -> None:
    for _ in range(int(WAIT_S / 0.05)):
        if paths.hook_socket.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the office never listened")


@pytest.mark.parametrize("ends_by", ["stop", "cancel"])
async def test_the_office_switches_threads_sooner_while_it_runs(
    host_interval: None, short_tmp: Path, ends_by: str
) -> None:
    paths = HivePaths(short_tmp / "home")
    init_office(paths)
    office = Office(paths, agents=False, program=hive)
    stop = asyncio.Event()
    run = asyncio.create_task(office.run(stop))
    await _until_listening(paths)
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)

    if ends_by == "stop":
        stop.set()
        await asyncio.wait_for(run, WAIT_S)
    else:
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, WAIT_S)
    assert sys.getswitchinterval() == pytest.approx(HOSTS_OWN)
