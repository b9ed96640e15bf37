"""Side panels: the pure formatting functions alone, then each widget in a pilot run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.text import Text
from textual.app import App, ComposeResult
from textual.message import Message as TextualMessage
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Static

from hive_core.schema import Ledger, LogEvent, Message, Task, TaskQuestion
from hive_tui.panels.board import (
    EMPTY_BOARD,
    BoardLine,
    BoardPanel,
    find_lines,
    inline_runs,
    parse_board,
    slice_runs,
    style_line,
    wrap_offsets,
)
from hive_tui.panels.inbox import EMPTY_INBOX, InboxPanel
from hive_tui.panels.log import (
    LogLines,
    LogPanel,
    agents_in,
    involves,
    log_runs,
    next_filter,
    row_lines,
    wrap,
)
from hive_tui.panels.tasks import EMPTY_TASKS, TasksPanel, open_questions, ordered, task_row

M = TypeVar("M", bound=TextualMessage)

# --- fixtures -------------------------------------------------------------------------


def big_board(lines: int) -> str:
    """A board like a busy manager's: sections of prose, task lists, code and rules."""
    out: list[str] = ["# Scranton: plan of record", ""]
    section = 0
    while len(out) < lines:
        section += 1
        out += [
            f"## Area {section}",
            "",
            f"Goal for **area {section}**: keep `hive task` in step with the ledger and "
            "make sure long lines of prose wrap across the panel without losing words.",
            f"- [ ] t-{section}a wire the `router` to the **committer**",
            f"- [x] t-{section}b finished, with a description long enough to wrap a line",
            f"  1. step {section}",
            "> the person: keep the scope small",
            "```",
            f"hive task add --title 'area {section}'",
            "```",
            "---",
        ]
    out = out[: lines - 1]
    out.append("END OF BOARD")
    return "\n".join(out)


def log_event(n: int, sender: str, to: str) -> LogEvent:
    return LogEvent(
        ts=f"2026-01-01T10:{n // 60:02d}:{n % 60:02d}Z",
        kind="route",
        msg=f"m{n:05d}",
        sender=sender,
        to=to,
        recipients=[to],
        act="inform",
        subject=f"event {n}",
    )


def task(task_id: str, **fields: Any) -> Task:
    defaults: dict[str, Any] = {
        "title": f"title of {task_id}",
        "created_at": "2026-01-01T10:00:00Z",
        "updated_at": "2026-01-01T10:00:00Z",
    }
    return Task(id=task_id, **{**defaults, **fields})


def mail(message_id: str, **fields: Any) -> Message:
    defaults: dict[str, Any] = {
        "conversation": message_id,
        "in_reply_to": None,
        "sender": "michael",
        "to": "human",
        "act": "inform",
        "subject": f"subject {message_id}",
        "body": f"body of {message_id}",
        "created_at": "2026-01-01T10:00:00Z",
    }
    return Message(id=message_id, **{**defaults, **fields})


class PanelApp(App[None]):
    def __init__(self, panel: Widget) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> ComposeResult:
        yield self.panel


def run_panel(
    panel: Widget,
    scenario: Callable[[Pilot[None]], Coroutine[Any, Any, None]],
    *,
    size: tuple[int, int] = (80, 24),
    messages: list[TextualMessage] | None = None,
) -> None:
    async def main() -> None:
        app = PanelApp(panel)
        hook = messages.append if messages is not None else None
        async with app.run_test(size=size, message_hook=hook) as pilot:
            await pilot.pause()
            await scenario(pilot)

    asyncio.run(asyncio.wait_for(main(), 60))


def posted_of(posted: list[TextualMessage], kind: type[M]) -> list[M]:
    """The messages of one kind, once each: the hook sees a bubbling message at every
    node it reaches."""
    unique = {id(message): message for message in posted if isinstance(message, kind)}
    return list(unique.values())


async def settled(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Scrolling may be animated: wait for it to arrive (a loaded machine is slow)."""
    deadline = asyncio.get_running_loop().time() + 10
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"never got {what}"
        await pilot.pause(0.02)


def screen_lines(panel: BoardPanel) -> list[str]:
    return [panel.render_line(y).text.rstrip() for y in range(panel.size.height)]


# --- board: pure ------------------------------------------------------------------------


def test_inline_spans_code_before_bold():
    assert inline_runs("run `**x**` then **go** and __stop__") == [
        ("run ", ""),
        ("**x**", "code"),
        (" then ", ""),
        ("go", "bold"),
        (" and ", ""),
        ("stop", "bold"),
    ]


def test_style_line_blocks():
    assert style_line("## Plan ##") == BoardLine((("Plan", "h2"),))
    assert style_line("###### deep").runs == (("deep", "h3"),)
    assert style_line("- - -").rule
    assert style_line("***").rule
    bullet = style_line("  * item `x`")
    assert bullet.runs == (("  ", ""), ("•", "bullet"), (" ", ""), ("item ", ""), ("x", "code"))
    assert bullet.hang == 4
    assert style_line("- [ ] open").runs[2:] == (("[ ]", "check-open"), (" ", ""), ("open", ""))
    done = style_line("- [x] shipped **it**")
    assert done.runs[2:] == (("[✓]", "check-done"), (" ", ""), ("shipped ", "done"), ("it", "bold"))
    assert done.hang == 6
    assert style_line("12. twelfth").runs[0] == ("12.", "bullet")
    assert style_line("> quoted").runs == (("▌ ", "quote"), ("quoted", "quote"))


def test_parse_board_fences_tabs_and_control_characters():
    lines = parse_board("```\n# not a heading\n```\n\tindented\x1b[2J")
    assert lines[0].runs == (("```", "fence"),)
    assert lines[1].runs == (("# not a heading", "codeblock"),)
    assert lines[3].text == "    indented\\x1b[2J"
    assert parse_board("  \n") == [BoardLine(((EMPTY_BOARD, "empty"),))]


def test_wrap_words_with_a_hanging_indent():
    text = "- the quick brown fox jumps over the lazy dog"
    starts = wrap_offsets(text, 16, hang=2)
    rows = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    assert rows == ["- the quick ", "brown fox ", "jumps over the ", "lazy dog"]
    assert wrap_offsets("short", 16) == [0]


def test_wrap_splits_words_longer_than_a_row_and_counts_wide_cells():
    assert wrap_offsets("a" * 25, 10) == [0, 10, 20]
    # Each CJK character is two cells wide.
    assert wrap_offsets("日本語のテキスト", 6) == [0, 3, 6]


@given(
    st.text(alphabet=st.sampled_from("ab 日😀-"), max_size=80),
    st.integers(4, 30),
    st.integers(0, 8),
)
def test_wrapped_rows_fit_and_cover_the_text(text: str, width: int, hang: int):
    starts = wrap_offsets(text, width, hang)
    assert starts[0] == 0 and starts == sorted(set(starts))
    ends = [*starts[1:], len(text)]
    for row, (start, end) in enumerate(zip(starts, ends, strict=True)):
        indent = hang if row and hang <= width // 2 else 0
        assert indent + cell_len(text[start:end].rstrip()) <= width


def test_find_lines_prefers_the_nearest_match():
    lines = ["a", "b", "c", "x", "a", "b", "c"]
    assert find_lines(["a", "b"], lines, near=5) == 4
    assert find_lines(["a", "b"], lines, near=1) == 0
    assert find_lines(["gone"], lines, near=99) == 6
    assert find_lines(["gone"], [], near=3) == 0


def test_slice_runs():
    runs = (("ab", ""), ("cd", "bold"), ("ef", ""))
    assert slice_runs(runs, 1, 5) == [("b", ""), ("cd", "bold"), ("e", "")]


# --- board: widget ----------------------------------------------------------------------


def test_board_renders_2000_lines_and_scrolls_to_the_end():
    board = BoardPanel()

    async def scenario(pilot: Pilot[None]) -> None:
        board.focus()
        board.show(big_board(2000))
        await pilot.pause()
        assert board.row_count > 2000  # long lines wrapped
        assert screen_lines(board)[0] == "Scranton: plan of record"
        await pilot.press("end")
        await settled(pilot, lambda: board.scroll_y == board.max_scroll_y > 0, "at the end")
        assert "END OF BOARD" in screen_lines(board)
        await pilot.press("pageup", "up", "home")
        await settled(pilot, lambda: board.scroll_y == 0, "back at the top")

    run_panel(board, scenario)


def test_board_updates_keep_the_reader_in_place():
    board = BoardPanel()
    text = big_board(600)

    async def scenario(pilot: Pilot[None]) -> None:
        board.show(text)
        await pilot.pause()
        board.scroll_to(y=300, animate=False)
        await pilot.pause()
        top = screen_lines(board)[0]
        board.show(text + "\n- a new line at the end")
        await pilot.pause()
        assert board.scroll_y == 300
        assert screen_lines(board)[0] == top
        # An edit above the view: the same line stays on top.
        board.show("# A new title line\n\n" + text)
        await pilot.pause()
        assert board.scroll_y == 302
        assert screen_lines(board)[0] == top

    run_panel(board, scenario)


def test_board_rewraps_on_resize_keeping_the_top_line():
    board = BoardPanel()

    async def scenario(pilot: Pilot[None]) -> None:
        board.show(big_board(400))
        await pilot.pause()
        board.scroll_to(y=120, animate=False)
        await pilot.pause()
        top = screen_lines(board)[0]
        rows = board.row_count
        await pilot.resize_terminal(50, 24)
        await pilot.pause()
        assert board.row_count > rows
        assert all(cell_len(line) <= board.size.width for line in screen_lines(board))
        assert screen_lines(board)[0].split()[:2] == top.split()[:2]

    run_panel(board, scenario)


def test_board_empty_state():
    board = BoardPanel()

    async def scenario(pilot: Pilot[None]) -> None:
        assert screen_lines(board)[0] == EMPTY_BOARD[: board.size.width].rstrip()
        board.show("# Plan")
        board.show("")
        await pilot.pause()
        assert screen_lines(board)[0].startswith("The board is empty")

    run_panel(board, scenario, size=(120, 10))


# --- log: pure --------------------------------------------------------------------------


def test_log_filter_helpers():
    event = LogEvent(ts="2026-01-01T10:00:00Z", kind="route", sender="pam", to="broadcast",
                     recipients=["jim", "dwight"])  # fmt: skip
    assert involves(event, "pam") and involves(event, "jim") and not involves(event, "kevin")
    hook = LogEvent(ts="2026-01-01T10:00:00Z", kind="hook", agent="kevin")
    assert agents_in([event, hook]) == ["dwight", "jim", "kevin", "pam"]
    assert next_filter(None, ["jim", "pam"], 1) == "jim"
    assert next_filter("pam", ["jim", "pam"], 1) is None
    assert next_filter(None, ["jim", "pam"], -1) == "pam"
    assert next_filter("gone", ["jim"], 1) == "jim"


def test_log_runs_split_time_kind_and_text():
    runs = log_runs(log_event(7, "pam", "jim"))
    assert runs[0] == ("2026-01-01 10:00:07", "time")
    assert runs[1][1] == "kind" and runs[1][0].strip() == "route"
    assert runs[2][0].lstrip().startswith("pam -> jim  inform")
    bad = log_runs(LogEvent(ts="2026-01-01T10:00:00Z", kind="quarantine", reason="a\x1b[2J"))
    assert bad[1][1] == "bad"
    assert "\x1b" not in "".join(text for text, _ in bad)


def test_log_row_wraps_with_the_time_column_kept():
    runs = log_runs(
        LogEvent(
            ts="2026-12-05T08:43:28.120Z",
            kind="agent",
            agent="michael",
            detail="started claude (pid 4242) in /home/pam/work/lexer, resuming session abc",
        )
    )
    lines = row_lines(runs, 40, today="2026-12-05")
    text = ["".join(t for t, _ in line) for line in lines]
    # Today: the time alone; the kind short; every word there, none past the width.
    assert text[0].startswith("08:43:28 agent  michael  - started")
    assert all(len(t) <= 40 for t in text) and len(text) > 1
    assert all(t.startswith(" " * 9) and t[9] != " " for t in text[1:])
    assert " ".join(text).split() == ["08:43:28", "agent", *runs[2][0].split()]
    # Another day: its date, the time to the minute.
    other = row_lines(runs, 40, today="2026-12-06")
    assert "".join(t for t, _ in other[0]).startswith("12-05 08:43 agent")
    # A word longer than a line is cut across lines, not lost.
    assert wrap("a " + "x" * 25, 10, 8) == ["a", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "x"]
    assert wrap("", 10, 8) == [""]
    # A word that fits a whole line is not cut to fill the first one's rest.
    assert wrap("router -> michael", 5, 13) == ["", "router ->", "michael"]
    # A narrow panel (80x24's) hangs the next lines by two cells, not under the kind.
    narrow = ["".join(t for t, _ in line) for line in row_lines(runs, 24, today="2026-12-05")]
    assert all(len(t) <= 24 for t in narrow) and narrow[1].startswith("  ") and narrow[1][2] != " "
    assert " ".join(narrow).split() == ["08:43:28", "agent", *runs[2][0].split()]


# --- log: widget ------------------------------------------------------------------------


def test_log_rows_wrap_to_the_panel_and_show_every_word():
    panel = LogPanel()
    detail = "could not start: exited (code 1) right after it started (0.2 s). " * 2

    async def scenario(pilot: Pilot[None]) -> None:
        panel.add([LogEvent(ts="2026-01-01T10:00:00Z", kind="agent", agent="jim", detail=detail)])
        await pilot.pause()
        lines = panel.query_one(LogLines)
        width = lines.scrollable_content_region.width
        drawn = [lines.render_line(y).text for y in range(lines.size.height)]
        shown = [line.rstrip() for line in drawn if line.strip()]
        assert len(shown) > 1 and all(len(line) <= width + 1 for line in shown)
        assert " ".join(" ".join(shown).split()).endswith(" ".join(detail.split()))
        assert lines.virtual_size.width <= lines.size.width  # nothing to scroll sideways

    run_panel(panel, scenario, size=(40, 20))


def test_log_newest_first_and_filtered_by_agent():
    panel = LogPanel()
    senders = ["pam", "jim", "dwight"]
    events = [log_event(n, senders[n % 3], senders[(n + 1) % 3]) for n in range(3000)]

    async def scenario(pilot: Pilot[None]) -> None:
        panel.add(events[:1000])
        panel.add(events[1000:])
        await pilot.pause()
        shown = panel.shown
        assert len(shown) == 3000
        assert shown[0] is events[-1] and shown[-1] is events[0]

        panel.set_filter("kevin")
        await pilot.pause()
        assert panel.shown == []

        panel.set_filter("pam")
        await pilot.pause()
        assert panel.shown and all(involves(e, "pam") for e in panel.shown)
        assert len(panel.shown) == 2000  # pam sends a third and receives a third
        assert [e.msg for e in panel.shown] == sorted(
            (e.msg or "" for e in panel.shown), reverse=True
        )
        assert "agent pam" in str(panel.query_one("#log-status", Static).content)

        # By keyboard: f cycles dwight -> jim -> pam -> everyone.
        panel.query_one("#log-lines").focus()
        panel.set_filter(None)
        await pilot.press("f")
        assert panel.filter == "dwight"
        await pilot.press("f", "f")
        assert panel.filter == "pam"
        await pilot.press("f")
        assert panel.filter is None
        await pilot.press("F")
        assert panel.filter == "pam"

    run_panel(panel, scenario)


def test_log_is_bounded_and_keeps_a_scrolled_reader_in_place():
    panel = LogPanel(max_events=100)

    async def scenario(pilot: Pilot[None]) -> None:
        panel.add([log_event(n, "pam", "jim") for n in range(150)])
        await pilot.pause()
        assert len(panel.shown) == 100
        assert panel.shown[-1].msg == "m00050"
        lines = panel.query_one(LogLines)
        lines.scroll_to(y=10, animate=False)
        await pilot.pause()
        reading = lines.row_at(0)
        assert reading is not None and reading is not panel.shown[0]
        panel.add([log_event(n, "pam", "jim") for n in range(150, 153)])
        await pilot.pause()
        assert lines.scroll_y > 10
        assert lines.row_at(0) is reading

    run_panel(panel, scenario)


def test_log_empty_state():
    panel = LogPanel()

    async def scenario(pilot: Pilot[None]) -> None:
        lines = panel.query_one("#log-lines")
        assert lines.render_line(0).text.startswith("Nothing has happened yet")

    run_panel(panel, scenario)


# --- tasks ------------------------------------------------------------------------------


def ledger() -> Ledger:
    return Ledger(
        tasks=[
            task("t-1", status="done", result="shipped in abc123"),
            task(
                "t-2",
                title="Pick a [b]database[/b]",
                assignee="jim",
                status="blocked",
                depends_on=["t-1", "t-3"],
                questions=[
                    TaskQuestion(question="Postgres or SQLite?", asked_by="jim"),
                    TaskQuestion(question="Budget?", answer="none"),
                ],
                spec="Compare the two.\x1b[31m",
            ),
            task("t-3", status="doing", assignee="pam", priority=1),
            task("t-4", priority=3),
        ]
    )


def test_task_rows_and_order():
    tasks = ordered(ledger())
    assert [t.id for t in tasks] == ["t-3", "t-2", "t-4", "t-1"]
    blocked = tasks[1]
    assert open_questions(blocked) == 1
    row = task_row(blocked, done={"t-1"})
    assert row[1].plain == "Pick a [b]database[/b]"  # shown as typed, not as markup
    assert row[5].plain == "t-1, t-3"
    assert row[6].plain == "?1"
    assert task_row(tasks[0], done=set())[6].plain == ""


def test_tasks_panel_table_detail_and_open():
    panel = TasksPanel()
    posted: list[TextualMessage] = []

    async def scenario(pilot: Pilot[None]) -> None:
        empty = panel.query_one("#tasks-empty", Static)
        assert empty.display and str(empty.content) == EMPTY_TASKS
        panel.show(ledger())
        await pilot.pause()
        table = panel.query_one(DataTable)
        assert not empty.display and table.display
        assert [row.key.value for row in table.ordered_rows] == ["t-3", "t-2", "t-4", "t-1"]
        table.focus()
        await pilot.press("down")
        await pilot.pause()
        assert panel.highlighted == "t-2"
        assert table.get_row("t-2")[6].plain == "?1"
        detail = panel.query_one("#task-detail-text", Static).content
        assert isinstance(detail, Text)
        assert "Postgres or SQLite?" in detail.plain and "not answered yet" in detail.plain
        assert "\\x1b[31m" in detail.plain and "\x1b" not in detail.plain
        # A refreshed ledger keeps the highlighted task.
        panel.show(Ledger(tasks=[task("t-0", status="doing"), *ledger().tasks]))
        await pilot.pause()
        assert panel.highlighted == "t-2"
        await pilot.press("enter")
        await pilot.pause()
        assert [m.task_id for m in posted_of(posted, TasksPanel.Open)] == ["t-2"]

    run_panel(panel, scenario, size=(100, 30), messages=posted)


# --- inbox ------------------------------------------------------------------------------


def test_inbox_newest_first_marker_detail_and_open():
    panel = InboxPanel()
    posted: list[TextualMessage] = []
    messages = [
        mail("20260101T100000000000Z-aaaaaa", subject="old news"),
        mail(
            "20260101T120000000000Z-cccccc",
            sender="jim",
            act="query",
            subject="Drop the users table?",
            body="It is in the way.\x1b]0;pwned\x07",
            needs_human=True,
            requires_reply=True,
        ),
        mail("20260101T110000000000Z-bbbbbb", subject="[red]markup[/red]"),
    ]

    async def scenario(pilot: Pilot[None]) -> None:
        assert str(panel.query_one("#inbox-empty", Static).content) == EMPTY_INBOX
        panel.show(messages)
        await pilot.pause()
        table = panel.query_one(DataTable)
        ids = [row.key.value for row in table.ordered_rows]
        assert ids == [
            "20260101T120000000000Z-cccccc",
            "20260101T110000000000Z-bbbbbb",
            "20260101T100000000000Z-aaaaaa",
        ]
        first = table.get_row_at(0)
        assert first[0].plain == "!" and first[2].plain == "jim" and first[3].plain == "query"
        assert table.get_row_at(1)[0].plain == ""
        assert table.get_row_at(1)[4].plain == "[red]markup[/red]"
        detail = panel.query_one("#message-detail-text", Static).content
        assert isinstance(detail, Text)
        assert "It is in the way.\\x1b]0;pwned\\x07" in detail.plain
        assert "\x1b" not in detail.plain and "needs human: yes" in detail.plain

        table.focus()
        await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        opened = [m.message_id for m in posted_of(posted, InboxPanel.Open)]
        assert opened == ["20260101T110000000000Z-bbbbbb"]

        panel.show([])
        await pilot.pause()
        assert panel.query_one("#inbox-empty").display and not table.display

    run_panel(panel, scenario, size=(100, 30), messages=posted)


# --- all panels -----------------------------------------------------------------------


def test_panels_take_data_before_they_are_mounted():
    """The app may feed a panel while composing it, before the first layout."""
    board, log, tasks, inbox = BoardPanel(), LogPanel(), TasksPanel(), InboxPanel()
    board.show(big_board(50))
    log.add([log_event(1, "pam", "jim")])
    tasks.show(ledger())
    inbox.show([mail("20260101T100000000000Z-aaaaaa")])

    class AllPanels(App[None]):
        def compose(self) -> ComposeResult:
            yield from (board, log, tasks, inbox)

    async def main() -> None:
        async with AllPanels().run_test(size=(100, 120)) as pilot:
            await pilot.pause()
            assert screen_lines(board)[0] == "Scranton: plan of record"
            assert [e.msg for e in log.shown] == ["m00001"]
            assert tasks.query_one(DataTable).row_count == 4
            assert inbox.highlighted == "20260101T100000000000Z-aaaaaa"

    asyncio.run(asyncio.wait_for(main(), 60))
