"""The memory keeper indexes a routing burst once it pauses, not while it goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hive_core.memory import keeper
from hive_core.memory.keeper import MemoryKeeper
from hive_core.paths import HivePaths


def make_keeper(tmp_path: Path) -> MemoryKeeper:
    return MemoryKeeper(HivePaths(tmp_path), budget=4000, use_cli=False, log=lambda _a, _t: None)


def test_indexing_waits_until_changes_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper, "INDEX_QUIET_S", 0.2)
    monkeypatch.setattr(keeper, "INDEX_DEFER_MAX_S", 60.0)
    memory = make_keeper(tmp_path)
    burst_over = False

    async def burst() -> None:
        nonlocal burst_over
        for i in range(20):  # changes every 0.05 s, each well within the quiet time
            memory.changed({tmp_path / f"m{i}.json"})
            await asyncio.sleep(0.05)
        burst_over = True

    async def main() -> bool:
        memory.changed({tmp_path / "first.json"})
        told = asyncio.create_task(burst())
        await memory._pause(asyncio.Event())
        over = burst_over
        await told
        return over

    assert asyncio.run(main()), "indexed while the burst went on"
    assert len(memory._changed) == 21, "every change is in the one batch"


def test_a_burst_that_never_pauses_is_indexed_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper, "INDEX_QUIET_S", 10.0)
    monkeypatch.setattr(keeper, "INDEX_DEFER_MAX_S", 0.3)
    memory = make_keeper(tmp_path)

    async def main() -> None:
        stop = asyncio.Event()

        async def forever() -> None:
            while not stop.is_set():
                memory.changed({tmp_path / "log.jsonl"})
                await asyncio.sleep(0.02)

        told = asyncio.create_task(forever())
        await memory._pause(asyncio.Event())  # returns: the test would hang otherwise
        stop.set()
        await told

    asyncio.run(main())


def test_stopping_ends_the_pause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keeper, "INDEX_DEFER_MAX_S", 3600.0)
    monkeypatch.setattr(keeper, "INDEX_QUIET_S", 3600.0)
    memory = make_keeper(tmp_path)

    async def main() -> None:
        stop = asyncio.Event()
        memory.changed({tmp_path / "m.json"})
        pause = asyncio.create_task(memory._pause(stop))
        await asyncio.sleep(0.05)
        stop.set()
        await pause

    asyncio.run(main())
