"""Send a message as the person: to, act, subject, body."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, TextArea

from hive_core.mail import check_draft
from hive_core.schema import ACTS, Draft
from hive_tui.screens.form import FormScreen


class SendScreen(FormScreen[Draft]):
    """Returns the Draft to send, or None if the person cancelled."""

    DEFAULT_CSS = """
    SendScreen { align: center middle; }
    #send { width: 80; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    #send Horizontal { height: auto; }
    #send Select { width: 1fr; }
    #body { height: 8; }
    #error { color: $error; height: auto; }
    """

    def __init__(self, roster: list[str], to: str) -> None:
        super().__init__()
        self.roster = roster
        self.to = to

    def compose(self) -> ComposeResult:
        targets = [*self.roster, "broadcast", "triage"]
        with Vertical(id="send"):
            yield Label("Send a message (ctrl+s sends, esc cancels)")
            with Horizontal():
                yield Select([(t, t) for t in targets], value=self.to, allow_blank=False, id="to")
                yield Select([(a, a) for a in ACTS], value="request", allow_blank=False, id="act")
            yield Input(placeholder="subject", id="subject")
            yield TextArea(id="body")
            yield Label("", id="error")
            with Horizontal():
                yield Button("Send", variant="primary", id="send-button")
                yield Button("Cancel", id="cancel-button")

    def on_mount(self) -> None:
        self.query_one("#subject", Input).focus()

    def action_send(self) -> None:
        to = str(self.query_one("#to", Select).value)
        act = str(self.query_one("#act", Select).value)
        subject = self.query_one("#subject", Input).value.strip()
        body = self.query_one("#body", TextArea).text
        draft = Draft(to=to, act=act, subject=subject, body=body)  # type: ignore[arg-type]
        problem = check_draft(draft)
        if problem:
            self.error(problem[0].upper() + problem[1:])
            return
        self.dismiss(draft)
