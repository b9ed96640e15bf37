"""The Inbox tab: what waits for the person (hive_core/team/escalations.py), newest first:
their mail, the manager's escalations, the tasks' open questions.

Messages are written by agents, so every cell is a rich Text (no markup is
interpreted) and control characters are made visible before anything is drawn.
"""

from __future__ import annotations

from rich.text import Text
from textual.message import Message as TextualMessage

from hive_core.render import clean, message, preview
from hive_core.schema import Message
from hive_core.team.escalations import newest_first
from hive_tui.panels.rows import Row, RowsPanel

EMPTY_INBOX = "Nothing waits for you: mail to `human`, escalations and task questions land here."
COLUMNS = ("!", "when", "from", "act", "subject")
SUBJECT_WIDTH = 60


def message_row(msg: Message) -> tuple[Text, ...]:
    """The table cells of `msg`; "!" marks a message that needs the person, [web] and
    [flagged] one to read as material, not instructions."""
    when = msg.created_at[:16].replace("T", " ")
    return (
        Text("!", "bold reverse red") if msg.needs_human else Text(""),
        Text(when, "dim"),
        Text(clean(msg.sender)),
        Text(msg.act, "bold" if msg.requires_reply else ""),
        Text.assemble(
            # Untrusted material is marked in the list too (the detail shows why).
            ("[web] ", "bold yellow") if msg.origin == "web" else "",
            ("[flagged] ", "bold red") if msg.injection else "",
            preview(msg.subject, SUBJECT_WIDTH) or "(no subject)",
        ),
    )


class InboxPanel(RowsPanel):
    """The person's messages. Keys: up/down (pageup/pagedown, home/end) move through
    them and the highlighted one shows in full below; enter posts `InboxPanel.Open`
    with its id (the app answers or marks it done). Fed by the app with `show(messages)`.
    """

    DEFAULT_CSS = """
    InboxPanel > DataTable { height: auto; max-height: 50%; }
    InboxPanel > #message-detail { height: 1fr; border-top: solid $primary-muted; padding: 0 1; }
    InboxPanel > #inbox-empty { color: $text-muted; text-style: italic; padding: 0 1; }
    """
    EMPTY_TEXT = EMPTY_INBOX
    COLUMNS = COLUMNS
    EMPTY_ID, TABLE_ID, DETAIL_ID = "inbox-empty", "inbox-table", "message-detail"

    class Open(TextualMessage):
        """The person pressed enter on a message."""

        def __init__(self, message_id: str) -> None:
            super().__init__()
            self.message_id = message_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._messages: dict[str, Message] = {}
        # Each message's cells, made once: a burst shows the list again a few times a
        # second, each time with the hundreds already listed.
        self._cells: dict[str, tuple[Text, ...]] = {}

    def show(self, messages: list[Message]) -> None:
        """Replace the list; the highlighted message stays highlighted if still there."""
        known, cells = self._messages, self._cells
        self._messages = {msg.id: msg for msg in newest_first(messages)}
        self._cells = {
            key: cells[key] if key in cells and known[key] == msg else message_row(msg)
            for key, msg in self._messages.items()
        }
        self.refill()

    def rows(self) -> list[Row]:
        return list(self._cells.items())

    def detail(self, key: str) -> Text:
        msg = self._messages.get(key)
        # The CLI's full view (headers, then the body), control characters made visible.
        return Text(message(msg, "")) if msg else Text()

    def opened(self, key: str) -> TextualMessage:
        return self.Open(key)
