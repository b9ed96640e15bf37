"""The app's claim of alt+1..9 can be given up (office.toml `alt_digits = false`, for a
tmux that binds M-1..M-9): alt+N then reaches the agent as tmux sends it (ESC N) and the
prefix and then N still focuses agent N. The keys the app does not claim are held against
a plain tmux pane byte for byte in tests/e2e/test_keys_parity.py."""

from __future__ import annotations

from pathlib import Path

from hive_tui.screens.help import HelpScreen
from tests.app.conftest import ServeApp, run_app
from tests.app.test_app import focused_pane, keys_of
from tests.app.test_app_keys import _home, _ready
from tests.support import until


async def test_alt_digits_off_leaves_alt_n_to_the_agent(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    paths = _home(short_tmp)
    toml = paths.office_toml.read_text()
    paths.office_toml.write_text(
        toml.replace('manager = "michael"', 'manager = "michael"\nalt_digits = false', 1)
    )
    app = serve_app(paths)
    async with run_app(app, (160, 48)) as pilot:
        await _ready(pilot, app)
        await pilot.press("alt+2", "alt+1")
        await until(pilot, lambda: keys_of(app, "michael") == b"\x1b2\x1b1", "ESC 2 ESC 1")
        assert focused_pane(app) == "michael"
        await pilot.press("ctrl+right_square_bracket", "2")
        assert focused_pane(app) == "jim"
        # No screen offers the keys the app gave up: not the key line, not the help.
        assert "alt+1..9" not in str(app.query_one("#keys").render())
        await pilot.press("ctrl+right_square_bracket", "question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        static = app.screen.query_one("#help").query_one("Static")
        text = "\n".join(static.render_line(y).text for y in range(static.size.height))
        assert "then one key" in text and "alt+1..9" not in text
