"""The Diff view from the keyboard: prefix then `d` lists the agents with changes against
their base and shows a picked file's hunks; esc closes it. A real office (`hive-office
serve`) with the app attached over the SocketLink (tests/app/conftest.py), a real git
worktree."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.syntax import Syntax
from textual.widgets import OptionList, Static

from hive_core.hive import init_office
from hive_core.paths import HivePaths
from hive_tui.app import HiveApp
from hive_tui.screens.diff import DiffScreen
from tests.app.conftest import ServeApp, run_app
from tests.app.test_worktree_keys import started
from tests.e2e.test_worktree import make_repo
from tests.support import until

PREFIX = "ctrl+right_square_bracket"


@pytest.fixture
def app(short_tmp: Path, serve_app: ServeApp) -> HiveApp:
    root = short_tmp
    repo = make_repo(root)
    paths = HivePaths(root / "home")
    paths.home.mkdir()
    agent = 'provider = "shell"\ncommand = ["sleep", "600"]\n'
    paths.office_toml.write_text(
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\n{agent}cwd = "{repo}"\n\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\n{agent}cwd = "{repo}"\n'
    )
    init_office(paths)
    return serve_app(paths)


async def test_prefix_d_shows_each_agents_changed_files_and_their_hunks(app: HiveApp) -> None:
    worktree = app.link.paths.worktree("jim")
    async with run_app(app, (160, 48)) as pilot:
        await until(pilot, lambda: started(app, "jim"), "jim started")
        (worktree / "a.txt").write_text("a\njim was here\n")
        (worktree / "notes.md").write_text("# notes\n")
        await pilot.press(PREFIX, "v")
        screen = await until(
            pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen, "the Diff view"
        )
        files = screen.query_one(OptionList)
        await until(pilot, lambda: files.option_count, "the changed files")
        rows = [str(files.get_option_at_index(i).prompt) for i in range(files.option_count)]
        assert rows[0].startswith("jim  hive/") and rows[0].endswith("+2 -0")
        assert rows[1:] == ["  a.txt  +1 -0", "  notes.md  +1 -0 new"]
        shown = screen.query_one("#diff-text", Static)
        await until(pilot, lambda: isinstance(shown.content, Syntax), "a.txt's hunks")
        assert isinstance(shown.content, Syntax)
        assert "+jim was here" in shown.content.code
        await pilot.press("down")
        await until(
            pilot,
            lambda: isinstance(shown.content, Syntax) and "+# notes" in shown.content.code,
            "notes.md's hunk",
        )
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DiffScreen), "the view closed")
