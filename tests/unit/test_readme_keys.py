"""README's keys are the app's (issue 23): the block between README's key markers is what
hive_tui.keydoc generates from the app's own key tables, so a key added, changed or
removed there fails here until the block is regenerated
(`.venv/bin/python -m hive_tui.keydoc --write README.md`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive_core.actions import ACTIONS
from hive_tui import keydoc
from hive_tui.commands import DIRECT_KEYS, VIEW_COMMANDS
from hive_tui.panels.log import LogPanel

README = Path(__file__).resolve().parents[2] / "README.md"
REGENERATE = ".venv/bin/python -m hive_tui.keydoc --write README.md"


def test_readmes_key_block_is_what_the_tables_generate() -> None:
    block = keydoc.current_block(README.read_text())
    assert block is not None, f"README.md lost its key markers:\n{keydoc.BEGIN}\n{keydoc.END}"
    assert block == keydoc.key_block(), f"README's keys differ from the app's; run {REGENERATE}"


def test_the_pictures_key_line_is_the_apps() -> None:
    drawn = keydoc.picture_lines(README.read_text())
    assert drawn, "README's picture of the screen lost its key line"
    assert drawn == [keydoc.picture_line()] * len(drawn), f"run {REGENERATE}"
    assert "? help" in keydoc.picture_line() and "q quit" in keydoc.picture_line()


def test_the_block_names_every_key_of_the_tables() -> None:
    block = keydoc.key_block()
    for command in VIEW_COMMANDS:
        assert f"| `ctrl+] {command.key}` | {command.help} |" in block, command
    for action in ACTIONS:
        if action.key:
            row = next(line for line in block.splitlines() if f"`ctrl+] {action.key}`" in line)
            assert action.help in row, action.name
    assert block.count("| `ctrl+] x` |") == 1  # pause and resume share it: one row
    for keys, _, text in DIRECT_KEYS:
        assert f"| `{keys}` | {text} |" in block
    assert "`ctrl+] ctrl+]`" in block
    assert "| the log (`ctrl+] l`) | `f` next agent · `F` previous agent |" in block


def test_the_block_follows_the_prefix_and_a_changed_binding() -> None:
    assert "| `ctrl+a ?` |" in keydoc.key_block("ctrl+a")
    before = keydoc.key_block()
    LogPanel.BINDINGS.append(("g", "cycle_filter(0)", "All agents"))
    try:
        assert keydoc.key_block() != before
        assert "`g` all agents" in keydoc.key_block()
    finally:
        LogPanel.BINDINGS.pop()
    assert keydoc.key_block() == before


def test_write_replaces_only_the_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# title\n\n```\n ctrl+] then: 1-9 agent · ? help\n```\nbefore\n"
        f"{keydoc.BEGIN}\n| stale |\n{keydoc.END}\nafter\n"
    )
    assert keydoc.main(["--write", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"# title\n\n```\n{keydoc.picture_line()}\n```\nbefore\n")
    assert text.endswith(f"{keydoc.END}\nafter\n")
    assert keydoc.current_block(text) == keydoc.key_block()
    assert "| stale |" not in text
    assert keydoc.main(["--write", str(readme)]) == 0
    assert readme.read_text() == text
    assert "already current" in capsys.readouterr().out


def test_write_refuses_a_file_without_markers_and_leaves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# mine\n\nno markers here\n")
    assert keydoc.main(["--write", str(readme)]) == 1
    assert readme.read_text() == "# mine\n\nno markers here\n"
    err = capsys.readouterr().err
    assert "has no key markers" in err and keydoc.BEGIN in err and keydoc.END in err
    assert keydoc.main(["--write", str(tmp_path / "missing.md")]) == 1
    assert "cannot read" in capsys.readouterr().err
