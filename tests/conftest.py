from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot
from hypothesis import settings

from hive_core.cli import hive
from hive_core.config import load_office
from hive_core.control import ControlServer
from hive_core.desks.state import AgentState
from hive_core.hive import init_office
from hive_core.office import Office, office_lock
from hive_core.paths import HivePaths
from hive_core.schema import ControlReply, ControlRequest
from tests.support import short_dir, wait_for

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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A fresh folder under /tmp, short enough for the office's AF_UNIX sockets (see
    tests/support.py), removed after the test."""
    with short_dir() as root:
        yield root


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
        self.office = Office(paths, agents=False, program=hive)
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        wait_for(paths.hook_socket.exists, "the hook socket", 20)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.office.run(self.stop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)


@pytest.fixture
def running(short_tmp: Path) -> Iterator[Running]:
    paths = HivePaths(short_tmp / "home")
    init_office(paths)
    office = Running(paths)
    for state in office.office.states.values():
        state.new_secret()
    yield office
    office.close()


class ProvingOffice:
    """Only the office's answer to "who is calling": its real control socket, with the
    home's lock held as a served office holds it, and no router (which would deliver
    what a test means to find in an outbox). For tests of verbs that need a proven
    caller; the process running them is the person's, acting for desks whose agents
    are not running. The whole office is tested with them in test_identity.py."""

    def __init__(self, paths: HivePaths) -> None:
        config = load_office(paths.office_toml)
        self.states = {
            a.id: AgentState(spec=a, manager=a.id == config.office.manager) for a in config.agents
        }
        self._lock = office_lock(paths)
        self._lock.__enter__()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = ControlServer(paths.control_socket, self._perform, agents=self.states)
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=20)

    async def _perform(self, req: ControlRequest) -> ControlReply:
        return ControlReply(ok=False, error="refused: only `whoami` is answered here.")

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=20)
        self.loop.close()
        self._lock.__exit__(None, None, None)


@pytest.fixture
def proving(office_home: HivePaths) -> Iterator[HivePaths]:
    """office_home with a ProvingOffice answering on it."""
    office = ProvingOffice(office_home)
    yield office_home
    office.close()
