"""Hire an agent: id, name, role, provider, web, host. The office checks it again and writes
office.toml (hive_core/team/hire.py); this form says what is wrong before it is sent."""

from __future__ import annotations

import shlex

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, Select

from hive_core.schema import ControlRequest
from hive_core.team.hire import PROVIDERS, HireRefused, on_the_roster, spec_from_request
from hive_tui.screens.form import FormScreen


class HireScreen(FormScreen[ControlRequest]):
    """Returns the `hire` request, or None if the person cancelled."""

    DEFAULT_CSS = """
    HireScreen { align: center middle; }
    #hire { width: 72; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    #hire Horizontal { height: auto; }
    #hire Select { width: 1fr; }
    #hire Horizontal Input { width: 1fr; }
    #error { color: $error; height: auto; }
    """

    def __init__(self, roster: list[str]) -> None:
        super().__init__()
        self.roster = roster

    def compose(self) -> ComposeResult:
        with Vertical(id="hire"):
            yield Label("Hire an agent (ctrl+s hires, esc cancels)")
            yield Input(placeholder="id (lowercase: dwight)", id="agent-id")
            yield Input(placeholder="name (Dwight)", id="name")
            yield Input(placeholder="role (one line: what it does for the team)", id="role")
            with Horizontal():
                yield Select(
                    [(p, p) for p in PROVIDERS],
                    value=PROVIDERS[0],
                    allow_blank=False,
                    id="provider",
                )
                yield Checkbox("reads the web", id="web")
            with Horizontal():
                yield Input(placeholder="host (empty: this machine)", id="host")
                yield Input(placeholder="ssh options (-p 2222)", id="ssh-args")
            yield Label("", id="error")
            with Horizontal():
                yield Button("Hire", variant="primary", id="send-button")
                yield Button("Cancel", id="cancel-button")

    def on_mount(self) -> None:
        self.query_one("#agent-id", Input).focus()

    def action_send(self) -> None:
        req = ControlRequest(
            cmd="hire",
            agent=self.query_one("#agent-id", Input).value.strip(),
            name=self.query_one("#name", Input).value.strip(),
            role=self.query_one("#role", Input).value.strip(),
            provider=str(self.query_one("#provider", Select).value),
            web=self.query_one("#web", Checkbox).value,
            host=self.query_one("#host", Input).value.strip() or None,
        )
        try:
            req.ssh_args = shlex.split(self.query_one("#ssh-args", Input).value)
        except ValueError:
            self.error("the ssh options do not parse: close the quote.")
            return
        try:
            spec_from_request(req, "~")
        except HireRefused as e:
            self.error(str(e))
            return
        if req.agent in self.roster:
            self.error(str(on_the_roster(req.agent)))
            return
        self.dismiss(req)
