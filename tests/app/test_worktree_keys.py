"""Merging from the Diff view and the map's overlap mark: `m` on an agent's file shows what
will change, y merges its branch into the base, n changes nothing, and a conflicting
branch changes nothing and lists the files; two agents whose branches touch one file carry
a mark on the map, a third does not. A real office (`hive-office serve`) with the app
attached over the SocketLink (tests/app/conftest.py), real git worktrees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from hive_core.hive import init_office
from hive_core.mail import message_names
from hive_core.paths import HivePaths
from hive_tui.app import HiveApp
from hive_tui.map.widget import OfficeMap
from hive_tui.screens.confirm import ConfirmScreen
from hive_tui.screens.diff import DiffScreen
from tests.app.conftest import ServeApp, run_app
from tests.e2e.test_worktree import git, make_repo
from tests.support import until

PREFIX = "ctrl+right_square_bracket"
AGENT = 'provider = "shell"\ncommand = ["sleep", "600"]\n'


def office_app(
    serve_app: ServeApp, root: Path, agents: list[str], extra: str = ""
) -> tuple[HiveApp, Path]:
    repo = make_repo(root)
    paths = HivePaths(root / "home")
    paths.home.mkdir()
    desks = "".join(
        f'[[agents]]\nid = "{a}"\nname = "{a.title()}"\n{AGENT}cwd = "{repo}"\n\n'
        for a in ["michael", *agents]
    )
    paths.office_toml.write_text(f'[office]\nmanager = "michael"\n{extra}\n{desks}')
    init_office(paths)
    return serve_app(paths), repo


def started(app: HiveApp, agent: str) -> bool:
    """The office started the agent's CLI (in the worktree it made for it first)."""
    return app.link.view(agent).pid is not None


@pytest.fixture
def app(short_tmp: Path, serve_app: ServeApp) -> tuple[HiveApp, Path]:
    return office_app(serve_app, short_tmp, ["jim"])


def text_of(widget: Static) -> str:
    return str(widget.render())


async def jim_commits(pilot: Pilot[Any], app: HiveApp, name: str, text: str) -> str:
    await until(pilot, lambda: started(app, "jim"), "jim started")
    worktree = app.link.paths.worktree("jim")
    (worktree / name).write_text(text)
    git(worktree, "add", name)
    git(worktree, "commit", "-qm", f"jim: {name}")
    return git(worktree, "rev-parse", "HEAD")


async def merge_key(pilot: Pilot[Any], app: HiveApp) -> DiffScreen:
    await pilot.press(PREFIX, "v")
    await until(pilot, lambda: isinstance(app.screen, DiffScreen), "the Diff view")
    screen = app.screen
    assert isinstance(screen, DiffScreen)
    files = screen.query_one(OptionList)
    await until(pilot, lambda: files.highlighted is not None, "jim's files")
    await pilot.press("m")
    return screen


async def result_of(pilot: Pilot[Any], screen: DiffScreen) -> str:
    shown = screen.query_one("#diff-result", Static)
    await until(pilot, lambda: shown.display and text_of(shown), "the merge's result")
    return text_of(shown)


async def test_m_asks_then_y_merges_jims_branch_into_main(app: tuple[HiveApp, Path]) -> None:
    hive, repo = app
    async with run_app(hive, (160, 48)) as pilot:
        head = await jim_commits(pilot, hive, "c.txt", "from jim\n")
        screen = await merge_key(pilot, hive)
        await until(pilot, lambda: isinstance(hive.screen, ConfirmScreen), "the question")
        ask = hive.screen
        assert isinstance(ask, ConfirmScreen)
        assert "c.txt" in ask.question and "-> main (1 commit)" in ask.question
        assert ask.question.endswith("Merge?")
        await pilot.press("y")
        result = await result_of(pilot, screen)
        assert result.startswith("merged hive/") and "into main" in result
        assert git(repo, "rev-parse", "main") == head
        assert (repo / "c.txt").read_text() == "from jim\n"
        # The list is read again: jim's branch now matches its base.
        files = screen.query_one(OptionList)
        await until(
            pilot,
            lambda: (
                not any(
                    "c.txt" in str(files.get_option_at_index(i).prompt)
                    for i in range(files.option_count)
                )
            ),
            "the merged file gone from the list",
        )
        await pilot.press("escape")


async def test_m_then_n_changes_nothing(app: tuple[HiveApp, Path]) -> None:
    hive, repo = app
    before = git(repo, "rev-parse", "main")
    async with run_app(hive, (160, 48)) as pilot:
        await jim_commits(pilot, hive, "c.txt", "from jim\n")
        screen = await merge_key(pilot, hive)
        await until(pilot, lambda: isinstance(hive.screen, ConfirmScreen), "the question")
        await pilot.press("n")
        assert await result_of(pilot, screen) == "not merged."
        assert git(repo, "rev-parse", "main") == before
        assert not (repo / "c.txt").exists()
        await pilot.press("escape")


async def test_a_conflicting_merge_changes_nothing_and_lists_the_files(
    app: tuple[HiveApp, Path],
) -> None:
    hive, repo = app
    async with run_app(hive, (160, 48)) as pilot:
        await jim_commits(pilot, hive, "a.txt", "jim's a\n")
        (repo / "a.txt").write_text("the person's a\n")
        git(repo, "commit", "-qam", "person: a")
        before = git(repo, "rev-parse", "main")
        screen = await merge_key(pilot, hive)
        result = await result_of(pilot, screen)
        assert "does not merge cleanly into main; nothing was changed" in result
        assert "\n  a.txt\n" in result
        assert result.endswith("michael was told.")
        assert not isinstance(hive.screen, ConfirmScreen)
        assert git(repo, "rev-parse", "main") == before
        assert (repo / "a.txt").read_text() == "the person's a\n"
        inbox = hive.link.paths.mailbox("michael").inbox
        await until(
            pilot,
            lambda: any(
                "conflicts with main" in (inbox / n).read_text() for n in message_names(inbox)
            ),
            "the manager mailed",
        )
        await pilot.press("escape")


async def test_the_map_marks_two_agents_whose_branches_touch_one_file(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    hive, _repo = office_app(
        serve_app, short_tmp, ["jim", "pam", "dwight"], "worktree_check_s = 0.2"
    )
    paths = hive.link.paths
    async with run_app(hive, (200, 60)) as pilot:
        await until(
            pilot, lambda: all(started(hive, a) for a in ("jim", "pam", "dwight")), "started"
        )
        (paths.worktree("jim") / "a.txt").write_text("jim's a\n")
        (paths.worktree("pam") / "a.txt").write_text("pam's a\n")
        (paths.worktree("dwight") / "b.txt").write_text("dwight's b\n")
        office_map = hive.query_one(OfficeMap)

        def floor() -> str:
            return "\n".join(office_map.render_line(y).text for y in range(office_map.size.height))

        await until(pilot, lambda: "Jim ⚠" in floor() and "Pam ⚠" in floor(), "the marks")
        assert "Dwight" in floor() and "Dwight ⚠" not in floor()
