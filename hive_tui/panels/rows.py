"""What the Tasks and Inbox tabs share: a table of rows keyed by id, the highlighted
row in full below it, an empty-state line, and enter to open a row."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

Row = tuple[str, tuple[Text, ...]]  # (key, cells)


class EmptyNotice(Static, can_focus=True):
    """The empty-state line: focusable, so the panel can hold the keys (and esc can leave
    it) before it has any rows."""


class RowsPanel(Vertical):
    """Subclasses name their ids and columns and say what a row shows and opens."""

    EMPTY_TEXT: ClassVar[str]
    COLUMNS: ClassVar[tuple[str, ...]]
    EMPTY_ID: ClassVar[str]
    TABLE_ID: ClassVar[str]
    DETAIL_ID: ClassVar[str]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # What the table lists (key -> cells, and the keys in order), see `_list`.
        self._listed: dict[str, tuple[Text, ...]] = {}
        self._order: list[str] = []

    def compose(self) -> ComposeResult:
        yield EmptyNotice(self.EMPTY_TEXT, id=self.EMPTY_ID, markup=False)
        table: DataTable[Text] = DataTable(id=self.TABLE_ID, cursor_type="row", zebra_stripes=True)
        table.add_columns(*self.COLUMNS)
        yield table
        with VerticalScroll(id=self.DETAIL_ID):
            yield Static(id=f"{self.DETAIL_ID}-text", markup=False)

    @abstractmethod
    def rows(self) -> Sequence[Row]:
        """The rows to list, in order."""

    @abstractmethod
    def detail(self, key: str) -> Text:
        """Everything about one row, for the pane under the table."""

    @abstractmethod
    def opened(self, key: str) -> Message:
        """What enter on a row posts."""

    def on_mount(self) -> None:
        self._fill()

    def focus_target(self) -> Widget:
        """What takes the keys when the panel is picked: the table, or the empty-state
        line while there are no rows."""
        table = self.query_one(f"#{self.TABLE_ID}", DataTable)
        return table if table.display else self.query_one(f"#{self.EMPTY_ID}")

    def refill(self) -> None:
        """Relist the rows; the highlighted one stays highlighted if it is still there.
        Before mounting there is no table yet: on_mount lists them."""
        if self.is_mounted:
            self._fill()

    def _fill(self) -> None:
        table = self.query_one(f"#{self.TABLE_ID}", DataTable)
        had_focus = self.has_focus_within
        current = self.highlighted
        rows = self.rows()
        self._list(table, rows)
        empty = not rows
        self.query_one(f"#{self.EMPTY_ID}").display = empty
        table.display = not empty
        self.query_one(f"#{self.DETAIL_ID}").display = not empty
        if current in {key for key, _ in rows}:
            table.move_cursor(row=table.get_row_index(current), animate=False)
        if had_focus:
            # The focused one of table / empty line may have just been hidden.
            self.screen.set_focus(self.focus_target())
        self._show_detail()

    def _list(self, table: DataTable[Text], rows: Sequence[Row]) -> None:
        """Put `rows` in the table. When they are the rows listed before plus new ones
        (mail arriving: hundreds a second in a burst), only the new rows are added and
        the order set, so the table measures those alone; clearing and adding every row
        again measured them all, in the app's loop, on each reload. Anything else (a row
        gone or changed) lists them all again, as every change did before."""
        listed = self._listed
        keys = [key for key, _ in rows]
        added = [(key, cells) for key, cells in rows if key not in listed]
        if len(listed) + len(added) == len(rows) and all(
            listed[key] is cells or _same(listed[key], cells)
            for key, cells in rows
            if key in listed
        ):
            if not added and keys == self._order:
                return
            for key, cells in added:
                table.add_row(*cells, key=key)
            # The table's own cells (the objects added) tell the rows apart in its sort.
            position = {tuple(map(id, table.get_row(key))): n for n, key in enumerate(keys)}
            if len(position) == len(keys):
                table.sort(key=lambda cells: position[tuple(map(id, cells))])
                listed.update(added)
                self._order = keys
                return
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        self._listed = dict(rows)
        self._order = keys

    @property
    def highlighted(self) -> str | None:
        """The key of the highlighted row."""
        table = self.query_one(f"#{self.TABLE_ID}", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def _show_detail(self) -> None:
        key = self.highlighted
        self.query_one(f"#{self.DETAIL_ID}-text", Static).update(
            self.detail(key) if key else Text()
        )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.opened(event.row_key.value))


def _same(a: tuple[Text, ...], b: tuple[Text, ...]) -> bool:
    """Whether two rows' cells draw alike (text, style and spans)."""
    return len(a) == len(b) and all(
        x.plain == y.plain and x.style == y.style and x.spans == y.spans
        for x, y in zip(a, b, strict=True)
    )
