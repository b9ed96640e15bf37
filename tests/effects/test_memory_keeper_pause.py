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


async def changes(memory: MemoryKeeper, paths: list[Path], every: float) -> None:
    """A routing burst as the keeper hears it: one change every `every` seconds."""
    for path in paths:
        memory.changed({path})
        await asyncio.sleep(every)


def test_indexing_waits_until_changes_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper, "INDEX_QUIET_S", 0.2)
    monkeypatch.setattr(keeper, "INDEX_DEFER_MAX_S", 60.0)
    memory = make_keeper(tmp_path)

    async def main() -> bool:
        memory.changed({tmp_path / "first.json"})
        # A change every 0.05 s, each well within the quiet time.
        burst = asyncio.create_task(
            changes(memory, [tmp_path / f"m{i}.json" for i in range(20)], 0.05)
        )
        await memory._pause(asyncio.Event())
        over = burst.done()
        await burst
        return over

    assert asyncio.run(main()), "indexed while the burst went on"
    assert len(set().union(*memory._pending)) == 21, "every change is in the one batch"


def test_a_burst_that_never_pauses_is_indexed_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper, "INDEX_QUIET_S", 10.0)
    monkeypatch.setattr(keeper, "INDEX_DEFER_MAX_S", 0.3)
    memory = make_keeper(tmp_path)

    async def main() -> None:
        # Longer than the cap by far: only the cap can end the pause.
        burst = asyncio.create_task(changes(memory, [tmp_path / "log.jsonl"] * 500, 0.02))
        await memory._pause(asyncio.Event())
        assert not burst.done(), "the pause ended at the cap, not after the burst"
        burst.cancel()

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
