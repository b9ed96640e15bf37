"""TerminalPane in a headless app: what shows, what repaints, what the pty is sent."""

from __future__ import annotations

import json
from pathlib import Path

from rich.color import Color
from textual.app import App, ComposeResult
from textual.message import Message

from hive_tui.terminal.pane import TerminalPane

FIXTURES = Path(__file__).parents[1] / "fixtures"


class PaneApp(App[None]):
    def __init__(self, rows: int = 10, cols: int = 40) -> None:
        super().__init__()
        self.rows, self.cols = rows, cols
        self.sent: list[bytes] = []
        self.resized: list[tuple[int, int]] = []

    def compose(self) -> ComposeResult:
        yield TerminalPane("jim", self.rows, self.cols)

    def on_terminal_pane_input(self, message: TerminalPane.Input) -> None:
        assert message.agent_id == "jim"
        self.sent.append(message.data)

    def on_terminal_pane_resized(self, message: TerminalPane.Resized) -> None:
        self.resized.append((message.rows, message.cols))

    @property
    def pane(self) -> TerminalPane:
        return self.query_one(TerminalPane)


def screen_text(pane: TerminalPane) -> list[str]:
    return [pane.render_line(y).text for y in range(pane.size.height)]


async def test_fed_text_shows_at_its_cells_with_its_colours() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        app.pane.feed(b"\x1b[3;5H\x1b[38;5;208mhot\x1b[0m \x1b[38;2;10;20;30mdeep")
        await pilot.pause(0.05)
        line = app.pane.render_line(2)
        assert line.text[4:12] == "hot deep"
        colors = {seg.text: seg.style.color for seg in line if seg.style and seg.text.strip()}
        assert colors["hot"] == Color.from_ansi(208)
        assert colors["deep"] == Color.from_rgb(10, 20, 30)
        assert line.cell_length == 40


async def test_a_feed_repaints_only_the_rows_it_changed() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.pane
        pane.feed(b"".join(b"row %d\r\n" % n for n in range(8)) + b"\x1b[?25l\x1b[4;1H")
        await pilot.pause(0.05)
        built = pane.strips_built
        pane.feed(b"ROW")
        await pilot.pause(0.05)
        assert pane.strips_built == built + 1
        assert pane.render_line(3).text.startswith("ROW 3")
        assert pane.strips_built == built + 1


async def test_many_chunks_are_painted_once_per_frame() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.pane
        pane.feed(b"\x1b[?25l")
        await pilot.pause(0.05)
        built = pane.strips_built
        for n in range(200):
            pane.feed(b"\x1b[1;1Hcount %d" % n)
        await pilot.pause(0.05)
        assert pane.render_line(0).text.startswith("count 199")
        assert pane.strips_built == built + 1


async def test_resize_resizes_the_emulator_and_posts_resized() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.resize_terminal(60, 20)
        await pilot.pause(0.05)
        assert app.pane.emulator.size == (20, 60)
        assert app.resized[-1] == (20, 60)


async def test_keys_go_to_the_child_except_reserved_ones() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        app.pane.focus()
        app.pane.reserved = {"ctrl+right_square_bracket"}
        await pilot.press("a", "enter", "tab", "escape", "ctrl+c", "ctrl+right_square_bracket")
        await pilot.pause()
        assert app.sent == [b"a", b"\r", b"\t", b"\x1b", b"\x03"]
        assert app.focused is app.pane


async def test_arrows_follow_application_cursor_mode() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        app.pane.focus()
        await pilot.press("up")
        app.pane.feed(b"\x1b[?1h")
        await pilot.press("up")
        await pilot.pause()
        assert app.sent == [b"\x1b[A", b"\x1bOA"]


async def test_paste_is_bracketed_only_when_the_child_asked() -> None:
    from textual import events

    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.pane
        pane.focus()
        pane.post_message(events.Paste("one\ntwo"))
        await pilot.pause()
        pane.feed(b"\x1b[?2004h")
        pane.post_message(events.Paste("three"))
        await pilot.pause()
        assert app.sent == [b"one\rtwo", b"\x1b[200~three\x1b[201~"]


async def test_mouse_goes_to_the_child_only_when_it_asked() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.click(TerminalPane, offset=(2, 3))
        assert app.sent == []
        app.pane.feed(b"\x1b[?1000h\x1b[?1006h")
        await pilot.click(TerminalPane, offset=(2, 3))
        await pilot.pause()
        assert app.sent == [b"\x1b[<0;3;4M", b"\x1b[<0;3;4m"]


async def test_shift_pageup_pages_through_history_and_a_key_returns() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.pane
        pane.focus()
        pane.feed(b"".join(b"line %d\r\n" % n for n in range(30)))
        await pilot.pause(0.05)
        assert screen_text(pane)[0].startswith("line 21")
        await pilot.press("shift+pageup")
        assert pane.scroll_back == 9
        assert screen_text(pane)[0].startswith("line 12")
        await pilot.press("x")
        assert pane.scroll_back == 0
        assert screen_text(pane)[0].startswith("line 21")
        assert app.sent == [b"x"]


async def test_a_notice_replaces_the_screen() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.pane
        pane.feed(b"hidden")
        pane.notice = "claude is not installed:\nnpm install -g @anthropic-ai/claude-code"
        await pilot.pause(0.05)
        lines = screen_text(pane)
        assert not any("hidden" in line for line in lines)
        assert lines[4].strip() == "claude is not installed:"
        assert lines[5].strip() == "npm install -g @anthropic-ai/claude-code"


async def test_title_and_query_replies() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        app.pane.feed(b"\x1b]0;\xe2\x9c\xb3 Claude Code\x07\x1b[6n")
        await pilot.pause()
        assert app.pane.title == "✳ Claude Code"
        assert app.sent == [b"\x1b[1;1R"]


async def test_recorded_claude_session_renders() -> None:
    meta = json.loads((FIXTURES / "claude_session.json").read_text())
    app = PaneApp(meta["rows"], meta["cols"])
    async with app.run_test(size=(meta["cols"], meta["rows"])) as pilot:
        pane = app.pane
        pane.feed((FIXTURES / "claude_session.bin").read_bytes())
        await pilot.pause(0.05)
        screen = "\n".join(screen_text(pane))
        assert "Bash(seq 1 200 | paste - - - -)" in screen
        assert "All 12 tests pass ✅" in screen
        pane.focus()
        await pilot.press("shift+pageup", "shift+pageup", "shift+pageup")
        history = "\n".join(screen_text(pane))
        assert "日本語のテキスト" in history or "Claude Code v2" in history


def test_messages_are_small() -> None:
    assert issubclass(TerminalPane.Input, Message)
    assert TerminalPane.Resized("jim", 3, 4).rows == 3
