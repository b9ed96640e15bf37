"""Issue 16: retention of agents' notes and archive (off by default, by age and size,
applied by the office's memory keeper), and one memory budget, office.toml's, for the
tidy and for the memory.md an agent is handed at start."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hive_core.config import ConfigError, load_office
from hive_core.hive import init_office
from hive_core.memory import MemoryStore, open_store
from hive_core.memory.retention import Retention, sweep
from hive_core.memory.sources import note_line
from hive_core.paths import HivePaths
from tests.conftest import Running
from tests.effects.test_hook_server import hook
from tests.support import wait_for

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OLD, NEW = "2026-09-01T09:00:00Z", "2026-11-30T09:00:00Z"


@pytest.fixture
def home(short_tmp: Path) -> Iterator[HivePaths]:
    root = short_tmp
    paths = HivePaths(root / "home")
    init_office(paths)
    yield paths


def set_office(paths: HivePaths, lines: str) -> None:
    toml = paths.office_toml.read_text()
    paths.office_toml.write_text(toml.replace("[office]\n", f"[office]\n{lines}\n", 1))


def seed(paths: HivePaths, agent: str = "jim") -> None:
    box = paths.mailbox(agent)
    box.memory_dir.mkdir(parents=True, exist_ok=True)
    box.notes.write_text(
        f"\n{note_line(OLD, 'the old vendor sandbox URL')}\n"
        f"\n{note_line(NEW, 'the new vendor sandbox URL')}\n"
    )
    box.archive.write_text(
        "# Archive\n\n"
        f"## {OLD}: moved out of the index\n\n- the 2025 release train\n\n"
        f"## {NEW}: moved out of the index\n\n- the 2026 release train\n\n"
    )


def test_retention_is_off_by_default_and_drops_nothing(home: HivePaths) -> None:
    seed(home)
    box = home.mailbox("jim")
    before = (box.notes.read_bytes(), box.archive.read_bytes())
    rule = Retention.of(load_office(home.office_toml).office)
    assert not rule.on
    assert sweep(home, "jim", rule, now=NOW) == 0
    assert (box.notes.read_bytes(), box.archive.read_bytes()) == before


def test_retention_by_age_drops_old_notes_and_sections(home: HivePaths) -> None:
    seed(home)
    box = home.mailbox("jim")

    def texts(store: MemoryStore) -> set[str]:
        return {h.entry.text for h in store.search("vendor release", "jim", "own", 50)}

    with open_store(home) as store:
        assert {"the old vendor sandbox URL", "the 2025 release train"} <= texts(store)
        assert sweep(home, "jim", Retention(days=30), store=store, now=NOW) == 2
        assert texts(store) == {"the new vendor sandbox URL", "the 2026 release train"}
    notes, archive = box.notes.read_text(), box.archive.read_text()
    assert "old vendor" not in notes and "new vendor" in notes
    assert "2025" not in archive and "2026 release train" in archive
    assert archive.startswith("# Archive\n")  # what is not a dated section stays
    assert "retention dropped 2 piece(s)" in box.changes.read_text()
    assert sweep(home, "jim", Retention(days=30), now=NOW) == 0  # nothing more to drop


def test_retention_by_size_drops_the_oldest_first(home: HivePaths) -> None:
    seed(home)
    box = home.mailbox("jim")
    total = len(box.notes.read_bytes()) + len(box.archive.read_bytes())
    # Room for all but the oldest archive section.
    dropped = sweep(home, "jim", Retention(max_bytes=total - 20), now=NOW)
    assert dropped == 1
    assert "2025" not in box.archive.read_text() and "2026" in box.archive.read_text()
    assert "old vendor" in box.notes.read_text()


def test_retention_settings_are_checked(short_tmp: Path) -> None:
    root = short_tmp
    paths = HivePaths(root / "home")
    init_office(paths)
    set_office(paths, "memory_retention_days = 0")
    with pytest.raises(ConfigError, match="memory_retention_days"):
        load_office(paths.office_toml)


def running_with(paths: HivePaths) -> Running:
    office = Running(paths)
    for state in office.office.states.values():
        state.new_secret()
    return office


def test_the_office_keeper_applies_retention(home: HivePaths) -> None:
    set_office(home, "memory_retention_days = 30")
    seed(home, "jim")
    office = running_with(home)
    try:
        box = home.mailbox("jim")
        wait_for(lambda: "old vendor" not in box.notes.read_text(), "old notes dropped", timeout=20)
        assert "new vendor" in box.notes.read_text()
    finally:
        office.close()


def test_the_tidy_and_the_start_keep_office_tomls_budget(home: HivePaths) -> None:
    """Issue 16: office.toml's memory_budget of 1024 for both the memory.md the agent is
    handed at SessionStart and the keeper's tidy when it goes idle."""
    set_office(home, 'memory_budget = 1024\nmemory_tidy = "rule"')
    box = home.mailbox("pete")
    box.memory_dir.mkdir(parents=True, exist_ok=True)
    facts = [f"- fact {i:02d}: the build cache lives on the second disk\n" for i in range(60)]
    box.memory.write_text("# Memory of pete\n\n" + "".join(facts))
    assert len(box.memory.read_bytes()) > 3 * 1024
    office = running_with(home)
    try:
        out = hook(office, "pete", {"hook_event_name": "SessionStart", "session_id": "s-1"})
        context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "fact 00" in context and "fact 59" not in context
        assert "fact 20" not in context  # 1,024 bytes hold under 20 of these lines
        hook(office, "pete", {"hook_event_name": "Stop", "stop_hook_active": False})
        wait_for(lambda: len(box.memory.read_bytes()) <= 1024, "memory.md tidied to 1024 bytes")
        assert "fact 59" in box.memory.read_text()  # the newest stays; the oldest go
        assert "fact 00" in box.archive.read_text()
    finally:
        office.close()
