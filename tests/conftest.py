from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot

from hive_core.hive import init_office
from hive_core.paths import HivePaths


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
