"""Board panel cost on a large board. Measures; asserts nothing.

    .venv/bin/python bench/bench_board.py [--lines 2000] [--runs 5] [--markdown]

In a headless Textual app (120x40), for a generated board.md of --lines lines:
  - show: BoardPanel.show(text) (parse, wrap, lay out), wall time;
  - paint: from show() until the app has processed the update (pilot.pause(); an idle
    pause is timed as the baseline);
  - page: scrolling through the whole board a page at a time, per page;
  - grow: show() of the same board plus one line (the manager appending);
  - resize: the terminal to 80 columns and back (every line re-wrapped), per resize;
  - stall: in each phase, the longest the event loop went without running a 5 ms
    ticker.
--markdown also times Textual's Markdown widget on the same text, for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import Markdown

from hive_tui.panels.board import BoardPanel

TICK = 0.005


def board_text(lines: int) -> str:
    """A board like a busy manager's: sections of prose, task lists, code and rules."""
    out = ["# Scranton: plan of record", ""]
    section = 0
    while len(out) < lines:
        section += 1
        out += [
            f"## Area {section}",
            "",
            f"Goal for **area {section}**: keep `hive task` in step with the ledger and make "
            "sure long lines of prose wrap across the panel without losing any words.",
            f"- [ ] t-{section}a wire the `router` to the **committer**",
            f"- [x] t-{section}b finished, with a description long enough to wrap a line",
            f"  1. step {section} of the plan",
            "> the person: keep the scope small",
            "```",
            f"hive task add --title 'area {section}'",
            "```",
            "---",
        ]
    return "\n".join(out[:lines])


class Ticker:
    """Records how late a 5 ms sleep wakes up: the event loop's stalls."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            self.lags.append(time.perf_counter() - before - TICK)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task:
            self._task.cancel()


class BenchApp(App[None]):
    def __init__(self, make: Callable[[], Widget]) -> None:
        super().__init__()
        self.make = make

    def compose(self) -> ComposeResult:
        yield self.make()


async def one_run(lines: int) -> dict[str, float]:
    text = board_text(lines)
    app = BenchApp(BoardPanel)
    figures: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        board = app.query_one(BoardPanel)
        board.focus()
        await pilot.pause()
        ticker = Ticker()
        ticker.start()

        def phase(name: str, began: float, count: int = 1) -> None:
            figures[name] = (time.perf_counter() - began) / count
            figures[f"{name}_stall"] = max(ticker.lags, default=0.0)
            ticker.lags.clear()

        began = time.perf_counter()
        for _ in range(20):
            await pilot.pause()
        phase("idle", began, 20)

        began = time.perf_counter()
        board.show(text)
        figures["show"] = time.perf_counter() - began
        await pilot.pause()
        phase("paint", began)

        # Page by page, without the scroll animation the keys would start (pilot.press
        # waits for it to finish, which measures the animation, not the widget).
        began = time.perf_counter()
        pages = range(0, board.row_count, board.size.height)
        for y in pages:
            board.scroll_to(y=y, animate=False)
            await pilot.pause()
        phase("page", began, len(pages))

        began = time.perf_counter()
        board.show(text + "\n- one more line")
        await pilot.pause()
        phase("grow", began)

        began = time.perf_counter()
        await pilot.resize_terminal(80, 40)
        await pilot.pause()
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        phase("resize", began, 2)

        ticker.stop()
        figures["rows"] = board.row_count
    return figures


async def markdown_run(lines: int) -> dict[str, float]:
    app = BenchApp(Markdown)
    async with app.run_test(size=(120, 40)) as pilot:
        markdown = app.query_one(Markdown)
        ticker = Ticker()
        ticker.start()
        start = time.perf_counter()
        await markdown.update(board_text(lines))
        await pilot.pause()
        elapsed = time.perf_counter() - start
        ticker.stop()
    return {"paint": elapsed, "stall_max": max(ticker.lags, default=0.0)}


def median_worst(runs: list[dict[str, float]], key: str) -> str:
    values = [run[key] * 1000 for run in runs]
    return f"{statistics.median(values):6.1f} / {max(values):6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()

    runs = [asyncio.run(one_run(args.lines)) for _ in range(args.runs)]
    rows = int(runs[0]["rows"])
    print(f"BoardPanel, {args.lines}-line board ({rows} rows wrapped at 116 columns), 120x40,")
    print(f"{args.runs} runs; median / worst in ms; stall = longest event-loop block in the phase")
    print(f"  {'show()':<34} {median_worst(runs, 'show')}")
    labels = {
        "idle": "idle pilot.pause() (baseline)",
        "paint": "show() + first paint",
        "page": "one page of fresh rows painted",
        "grow": "show() of the board + 1 line",
        "resize": "resize (re-wrap all) + paint",
    }
    for key, label in labels.items():
        print(
            f"  {label:<34} {median_worst(runs, key)}   stall {median_worst(runs, key + '_stall')}"
        )
    if args.markdown:
        figures = asyncio.run(markdown_run(args.lines))
        print(
            f"Textual Markdown widget, same board: paint {figures['paint'] * 1000:.0f} ms, "
            f"stall max {figures['stall_max'] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
