"""The Inbox tab: the person's mail and the manager's escalations, newest first.

Messages are written by agents, so every cell is a rich Text (no markup is
interpreted) and control characters are made visible before anything is drawn.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message as TextualMessage
from textual.widgets import DataTable, Static

from hive_core.cli.render import clean, message, one_line
from hive_core.schema import Message

EMPTY_INBOX = "No mail for you: agents write with `hive send --to human`; escalations land here."
COLUMNS = ("!", "when", "from", "act", "subject")
SUBJECT_WIDTH = 60


def newest_first(messages: list[Message]) -> list[Message]:
    """Message ids sort by creation time, so the largest id is the newest message."""
    return sorted(messages, key=lambda m: m.id, reverse=True)


def message_row(msg: Message) -> tuple[Text, ...]:
    """The table cells of `msg`; "!" marks a message that needs the person."""
    when = msg.created_at[:16].replace("T", " ")
    return (
        Text("!", "bold reverse red") if msg.needs_human else Text(""),
        Text(when, "dim"),
        Text(clean(msg.sender)),
        Text(msg.act, "bold" if msg.requires_reply else ""),
        Text(one_line(msg.subject, SUBJECT_WIDTH) or "(no subject)"),
    )


class InboxPanel(Vertical):
    """The person's messages. Keys: up/down (pageup/pagedown, home/end) move through
    them and the highlighted one shows in full below; enter posts `InboxPanel.Open`
    with its id (the app answers or marks it done). Fed by the app with `show(messages)`.
    """

    DEFAULT_CSS = """
    InboxPanel > DataTable { height: auto; max-height: 50%; }
    InboxPanel > #message-detail { height: 1fr; border-top: solid $primary-muted; padding: 0 1; }
    InboxPanel > #inbox-empty { color: $text-muted; text-style: italic; padding: 0 1; }
    """

    class Open(TextualMessage):
        """The person pressed enter on a message."""

        def __init__(self, message_id: str) -> None:
            super().__init__()
            self.message_id = message_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._inbox: list[Message] = []
        self._messages: dict[str, Message] = {}

    def compose(self) -> ComposeResult:
        yield Static(EMPTY_INBOX, id="inbox-empty", markup=False)
        table: DataTable[Text] = DataTable(id="inbox-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        with VerticalScroll(id="message-detail"):
            yield Static(id="message-detail-text", markup=False)

    def on_mount(self) -> None:
        self._fill()

    def show(self, messages: list[Message]) -> None:
        """Replace the list; the highlighted message stays highlighted if still there."""
        self._inbox = messages
        if self.is_mounted:
            self._fill()

    def _fill(self) -> None:
        table = self.query_one("#inbox-table", DataTable)
        current = self.highlighted
        ordered = newest_first(self._inbox)
        self._messages = {msg.id: msg for msg in ordered}
        table.clear()
        for msg in ordered:
            table.add_row(*message_row(msg), key=msg.id)
        self._set_empty(not ordered)
        if current in self._messages:
            table.move_cursor(row=table.get_row_index(current), animate=False)
        self._show_detail()

    @property
    def highlighted(self) -> str | None:
        """The id of the highlighted message."""
        table = self.query_one("#inbox-table", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def _set_empty(self, empty: bool) -> None:
        self.query_one("#inbox-empty").display = empty
        self.query_one("#inbox-table").display = not empty
        self.query_one("#message-detail").display = not empty

    def _show_detail(self) -> None:
        msg = self._messages.get(self.highlighted or "")
        # The CLI's full view (headers, then the body), control characters made visible.
        body = Text(message(msg, "")) if msg else Text()
        self.query_one("#message-detail-text", Static).update(body)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Open(event.row_key.value))
