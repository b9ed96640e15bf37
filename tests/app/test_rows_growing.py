"""A table panel (Inbox, Tasks) that grows by new rows adds those alone: in a burst of
mail the Inbox is reloaded many times a second, and clearing and adding every row
again made the table measure all of them on the app's loop each time (issue 25:
keystroke echo while 2,000 messages route). What it lists is the same either way:
newest first, the highlighted row kept."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable

from hive_tui.panels.inbox import InboxPanel
from tests.app.test_panels import mail, run_panel


def stamp(n: int) -> str:
    return f"20260101T{n // 3600:02d}{n // 60 % 60:02d}{n % 60:02d}000000Z-aaaaaa"


def test_new_mail_is_added_alone_and_listed_as_a_full_relist_would(monkeypatch: Any) -> None:
    measured: list[int] = []
    update = DataTable._update_dimensions

    def counting(self: DataTable[Any], new_rows: Any) -> None:
        rows = list(new_rows)
        measured.append(len(rows))
        update(self, rows)

    monkeypatch.setattr(DataTable, "_update_dimensions", counting)
    panel = InboxPanel()
    first = [mail(stamp(n)) for n in range(200)]
    wide = mail(stamp(500), subject="a subject as wide as the column lets it be")

    async def scenario(pilot: Pilot[None]) -> None:
        table = panel.query_one(DataTable)
        panel.show(first)
        await pilot.pause()
        table.move_cursor(row=table.get_row_index(stamp(150)), animate=False)
        await pilot.pause()
        measured.clear()

        # Five arrive: only they are measured.
        arrived = [mail(stamp(n)) for n in range(200, 204)] + [wide]
        panel.show(first + arrived)
        await pilot.pause()
        assert sum(measured) == 5
        everything = sorted(first + arrived, key=lambda m: m.id, reverse=True)
        assert [r.key.value for r in table.ordered_rows] == [m.id for m in everything]
        assert [table.get_row_at(i)[4].plain for i in range(3)] == [
            m.subject for m in everything[:3]
        ]
        assert panel.highlighted == stamp(150)

        # The same list again: nothing to do.
        measured.clear()
        panel.show(first + arrived)
        await pilot.pause()
        assert sum(measured) == 0

        # One read: every row listed again.
        measured.clear()
        panel.show(first + arrived[:-1])
        await pilot.pause()
        assert sum(measured) == 204
        rest = sorted(first + arrived[:-1], key=lambda m: m.id, reverse=True)
        assert [r.key.value for r in table.ordered_rows] == [m.id for m in rest]
        assert panel.highlighted == stamp(150)

    run_panel(panel, scenario, size=(160, 40))
