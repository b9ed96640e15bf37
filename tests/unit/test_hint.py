"""hint.office_command: the command line every hint names."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from hive_core.hint import office_command
from hive_core.paths import resolve_home


def test_home_is_named_unless_it_is_the_one_found_without_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HIVE_HOME", raising=False)
    assert office_command(resolve_home(None), "stop") == "hive-office stop"
    office = tmp_path / "my office"
    typed = office_command(office, "answer", "ID", "TEXT")
    assert shlex.split(typed) == ["hive-office", "--home", str(office), "answer", "ID", "TEXT"]
    # HIVE_HOME names it already; the default home is then the one that needs --home.
    monkeypatch.setenv("HIVE_HOME", str(office))
    assert office_command(office) == "hive-office"
    default = Path("~/.hive-office").expanduser()
    assert office_command(default, "stop") == f"hive-office --home {default} stop"
