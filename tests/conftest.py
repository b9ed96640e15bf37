from __future__ import annotations

from pathlib import Path

import pytest

from hive_core.hive import init_office
from hive_core.paths import HivePaths


@pytest.fixture
def office_home(tmp_path: Path) -> HivePaths:
    """A freshly initialised office (default roster) under tmp_path/home."""
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    return paths
