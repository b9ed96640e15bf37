from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot
from hypothesis import settings

from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.paths import HivePaths

# No property test has a time limit: these machines are shared, and a slow example on a
# loaded one is not a failure (speed is measured by bench/, never asserted).
settings.register_profile("hive", deadline=None)
settings.load_profile("hive")


@pytest.fixture
def office_home(tmp_path: Path) -> HivePaths:
    """A freshly initialised office (default roster) under tmp_path/home."""
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    return paths


SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"


class _RepoSnapshots(pytest_textual_snapshot.SVGImageExtension):
    """SVG snapshots live in snapshots/<test module>/ at the top of the repo."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


@pytest.fixture
def snapshots_in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-textual-snapshot looks its extension up when its fixture starts: patch first."""
    monkeypatch.setattr(pytest_textual_snapshot, "SVGImageExtension", _RepoSnapshots)


class Running:
    """An Office (no agent CLIs) on its own loop in a thread."""

    def __init__(self, paths: HivePaths) -> None:
        self.office = Office(paths, agents=False)
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        end = time.monotonic() + 20
        while not paths.hook_socket.exists():
            assert time.monotonic() < end, "hook socket never appeared"
            time.sleep(0.02)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.office.run(self.stop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)


@pytest.fixture
def running() -> Iterator[Running]:
    root = Path(tempfile.mkdtemp(prefix="hive-hs-", dir="/tmp"))
    paths = HivePaths(root / "home")
    init_office(paths)
    office = Running(paths)
    for state in office.office.states.values():
        state.new_secret()
    yield office
    office.close()
