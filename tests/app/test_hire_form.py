"""The app's hire form for a desk on another machine: its host and ssh options go into
the request the office gets; options that do not parse are said on the form."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Input

from hive_core.schema import ControlRequest
from hive_tui.screens.hire import HireScreen


class FormApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.results: list[ControlRequest | None] = []

    def on_mount(self) -> None:
        self.push_screen(HireScreen(["michael"]), self.results.append)


async def test_the_form_sends_the_host_and_its_ssh_options() -> None:
    app = FormApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        form = app.screen
        form.query_one("#agent-id", Input).value = "dwight"
        form.query_one("#name", Input).value = "Dwight"
        form.query_one("#host", Input).value = "gpu1"
        form.query_one("#ssh-args", Input).value = "-p '2222"
        await pilot.press("ctrl+s")
        assert "do not parse" in str(form.query_one("#error").render())
        assert app.results == []
        form.query_one("#ssh-args", Input).value = "-p 2222 -o 'User=me'"
        await pilot.press("ctrl+s")
        await pilot.pause()
        [req] = app.results
        assert req is not None
        assert (req.agent, req.host, req.ssh_args) == (
            "dwight",
            "gpu1",
            ["-p", "2222", "-o", "User=me"],
        )


async def test_ssh_options_without_a_host_are_refused_on_the_form() -> None:
    app = FormApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        form = app.screen
        form.query_one("#agent-id", Input).value = "dwight"
        form.query_one("#name", Input).value = "Dwight"
        form.query_one("#ssh-args", Input).value = "-p 2222"
        await pilot.press("ctrl+s")
        assert "give its host too" in str(form.query_one("#error").render())
        form.query_one("#ssh-args", Input).value = ""
        await pilot.press("ctrl+s")
        await pilot.pause()
        [req] = app.results
        assert req is not None and req.host is None and req.ssh_args == []
