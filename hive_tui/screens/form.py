"""What the send and answer screens share: ctrl+s sends, esc (or Cancel) closes, and a
line that says what is wrong."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Button, Label

Result = TypeVar("Result")


class FormScreen(ModalScreen[Result | None]):
    """Subclasses compose a Label with id "error" and buttons "send-button" and
    "cancel-button", and implement action_send (dismissing with the result)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "send", "send"),
    ]

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        await self.run_action("send" if event.button.id == "send-button" else "cancel")

    def action_cancel(self) -> None:
        self.dismiss(None)

    def error(self, text: str) -> None:
        self.query_one("#error", Label).update(text)
