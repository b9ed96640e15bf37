"""Send a message as the person: to, act, subject, body. The send is `hive send`, run
by the office (hive_tui/verbs.py), here in the form: a refusal, or an office that does
not answer, is said with the text still there to send again."""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, TextArea

from hive_core.mail import check_draft
from hive_core.schema import ACTS, Draft
from hive_tui import verbs
from hive_tui.screens.form import FormScreen


class SendScreen(FormScreen[str]):
    """Returns what was done ("Sent to jim."), or None if the person cancelled."""

    DEFAULT_CSS = """
    SendScreen { align: center middle; }
    #send { width: 80; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    #send Horizontal { height: auto; }
    #send Select { width: 1fr; }
    #body { height: 8; }
    #error { color: $error; height: auto; }
    """

    def __init__(self, roster: list[str], to: str, hive: verbs.Run) -> None:
        super().__init__()
        self.roster = roster
        self.to = to
        self._hive = hive
        self._busy = False

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
        if not self._busy:
            self._busy = True
            self.run_worker(self._send(draft), exclusive=True)

    async def _send(self, draft: Draft) -> None:
        sent = await self._hive(*verbs.send(draft))
        self._busy = False
        if sent.code != 0:
            self.error(f"Not sent: {escape(sent.said)}")
            return
        self.dismiss(f"Sent to {draft.to}.")
