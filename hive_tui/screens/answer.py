"""Answer an escalation: the question, and the person's answer (sent to whoever asked
and to the manager)."""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static, TextArea

from hive_core.schema import Message
from hive_core.text import shown as clean
from hive_tui.screens.form import FormScreen


class AnswerScreen(FormScreen[str]):
    """Returns the answer text, or None if the person closed it without answering."""

    DEFAULT_CSS = """
    AnswerScreen { align: center middle; }
    #answer { width: 90; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    #question { max-height: 14; overflow-y: auto; margin-bottom: 1; }
    #text { height: 6; }
    #answer Horizontal { height: auto; }
    #error { color: $error; height: auto; }
    """

    def __init__(self, message: Message) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        m = self.message
        head = f"[b]{escape(clean(m.subject or m.act))}[/b]  from {escape(m.sender)} ({m.act})"
        if m.task:
            head += f"  task {escape(m.task)}"
        with Vertical(id="answer"):
            yield Label("Answer (ctrl+s sends it to the asker and the manager, esc closes)")
            yield Static(head + "\n\n" + escape(clean(m.body)), id="question")
            yield TextArea(id="text")
            yield Label("", id="error")
            with Horizontal():
                yield Button("Send answer", variant="primary", id="send-button")
                yield Button("Close", id="cancel-button")

    def on_mount(self) -> None:
        self.query_one("#text", TextArea).focus()

    def action_send(self) -> None:
        text = self.query_one("#text", TextArea).text.strip()
        if not text:
            self.error("Write an answer first (or esc to close).")
            return
        self.dismiss(text)
