"""What `quit` means to a client of an office that runs on its own: stop the office, or
only detach from it (issue 11)."""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

QuitChoice = Literal["stop", "detach"]


class QuitScreen(ModalScreen[QuitChoice | None]):
    """s stops the office, d detaches, esc (or n) neither. Enter is none of them: a key
    typed out of habit must not stop a team."""

    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    #quit { width: 70; max-width: 100%; height: auto; border: round $warning; background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "choose('stop')", "stop the office"),
        Binding("d", "choose('detach')", "detach"),
        Binding("n,escape", "choose(None)", "cancel"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="quit"):
            yield Static(
                "Leave the office?\n\n"
                "[b]s[/b] stop the office: agents stopped, mail routed, last commit\n"
                "[b]d[/b] detach: the office and its agents keep running "
                "(`hive-office` attaches again)\n"
                "[b]n[/b] / esc cancel"
            )

    def action_choose(self, choice: QuitChoice | None) -> None:
        self.dismiss(choice)
