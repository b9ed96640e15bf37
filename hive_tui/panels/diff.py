"""The Diff view: agents with changes against their base, each file with its +/-
counts, and the hunks of the picked file in colour.

The git work is hive_core's (`worktrees.office_review`); it runs on a thread, never on
the app's loop (each refresh stats every file of every worktree).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from rich.markup import escape
from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from hive_core.worktree_plan import FilePatch
from hive_core.worktrees import AgentReview

Load = Callable[[], list[AgentReview]]
# A file's hunks past this many lines are cut (a generated file can be huge).
SHOWN_LINES_MAX = 5_000


def file_rows(reviews: list[AgentReview]) -> list[tuple[str, str | None]]:
    """The list's rows: (text, id); an agent's heading has no id (not pickable)."""
    rows: list[tuple[str, str | None]] = []
    for review in reviews:
        if review.error:
            rows.append((f"{review.agent}: {review.error}", None))
            continue
        added = sum(f.added for f in review.files)
        deleted = sum(f.deleted for f in review.files)
        rows.append((f"{review.agent}  {review.branch}  +{added} -{deleted}", None))
        for i, stat in enumerate(review.files):
            counts = "binary" if stat.binary else f"+{stat.added} -{stat.deleted}"
            new = " new" if stat.untracked else ""
            rows.append((f"  {stat.path}  {counts}{new}", f"{review.agent}:{i}"))
    return rows


def hunks_text(patch: FilePatch) -> str:
    if patch.binary:
        return f"{patch.path}: binary file changed"
    lines: list[str] = []
    for hunk in patch.hunks:
        lines.append(hunk.header)
        lines.extend(hunk.lines)
        if len(lines) > SHOWN_LINES_MAX:
            lines = [*lines[:SHOWN_LINES_MAX], f"... cut at {SHOWN_LINES_MAX} lines"]
            break
    return "\n".join(lines)


class DiffScreen(ModalScreen[None]):
    """Arrows pick a file, its hunks show on the right; r refreshes; esc closes."""

    DEFAULT_CSS = """
    DiffScreen { align: center middle; }
    #diff-box { width: 100%; height: 100%; border: round $accent; background: $surface; }
    #diff-files { width: 45%; height: 1fr; }
    #diff-hunks { width: 1fr; height: 1fr; border-left: solid $panel; }
    #diff-status { height: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close"),
        Binding("r", "refresh", "refresh"),
    ]

    def __init__(self, load: Load) -> None:
        super().__init__()
        self._load = load
        self._reviews: dict[str, AgentReview] = {}

    def compose(self) -> ComposeResult:
        yield Static("Reading the agents' worktrees…", id="diff-status")
        with Horizontal(id="diff-box"):
            yield OptionList(id="diff-files")
            with VerticalScroll(id="diff-hunks"):
                yield Static("", id="diff-text")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self.action_refresh()

    def action_refresh(self) -> None:
        self.run_worker(self._refresh(), group="diff", exclusive=True)

    async def _refresh(self) -> None:
        status = self.query_one("#diff-status", Static)
        try:
            reviews = await asyncio.to_thread(self._load)
        except Exception as exc:  # git missing or a worktree unreadable: say so
            status.update(f"Could not read the worktrees: {escape(str(exc))}")
            return
        self._reviews = {r.agent: r for r in reviews}
        files = self.query_one(OptionList)
        files.clear_options()
        for text, option_id in file_rows(reviews):
            files.add_option(Option(Text(text), id=option_id, disabled=option_id is None))
        changed = sum(1 for r in reviews if not r.error)
        status.update(
            f"{changed} agent(s) with changes against their base · arrows pick a file · "
            "r refresh · esc close · `hive-office merge AGENT` merges"
            if reviews
            else "No agent has changes against its base. esc closes."
        )
        first = next((i for i, (_, oid) in enumerate(file_rows(reviews)) if oid), None)
        if first is not None:
            files.highlighted = first

    @on(OptionList.OptionHighlighted, "#diff-files")
    @on(OptionList.OptionSelected, "#diff-files")
    def show_file(self, event: OptionList.OptionHighlighted | OptionList.OptionSelected) -> None:
        agent, _, index = (event.option.id or "").partition(":")
        review = self._reviews.get(agent)
        if review is None or not index:
            return
        patch = review.patches[int(index)]
        self.query_one("#diff-text", Static).update(
            Syntax(hunks_text(patch), "diff", theme="ansi_dark", word_wrap=False)
        )
