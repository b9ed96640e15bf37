"""The Diff view: agents with changes against their base, each file with its +/-
counts, and the hunks of the picked file in colour.

The git work is hive_core's (`worktrees.office_review`), on a thread, never on the app's
loop (each refresh stats every file of every worktree); `m` merges as the person's `hive
merge` does, run by the office (hive_tui/verbs.py): its dry run is the question, and a
conflict is told to the manager by the verb.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from hive_core.worktrees import DRY_RUN_ENDS, AgentReview
from hive_core.worktrees.plan import FilePatch
from hive_tui import verbs
from hive_tui.screens.confirm import ConfirmScreen

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
    /* What is left under the status line (and a merge's result): a box of 100% would
       push its bottom border off the screen. */
    #diff-box { width: 100%; height: 1fr; border: round $accent; background: $surface; }
    #diff-files { width: 45%; height: 1fr; }
    #diff-hunks { width: 1fr; height: 1fr; border-left: solid $panel; }
    #diff-status { height: 1; color: $text-muted; }
    #diff-result { height: auto; max-height: 12; display: none; border: round $warning; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close"),
        Binding("r", "refresh", "refresh"),
        Binding("m", "merge", "merge"),
    ]

    def __init__(self, load: Load, hive: verbs.Run) -> None:
        super().__init__()
        self._load = load
        self._hive = hive
        self._reviews: dict[str, AgentReview] = {}

    def compose(self) -> ComposeResult:
        yield Static("Reading the agents' worktrees…", id="diff-status")
        yield Static("", id="diff-result")
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
            "m merge the agent's branch · r refresh · esc close"
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
        # Imported when a file is first shown: rich.syntax brings Pygments (~30 ms of the
        # app's start, before a first frame that never needs it).
        from rich.syntax import Syntax

        self.query_one("#diff-text", Static).update(
            Syntax(hunks_text(patch), "diff", theme="ansi_dark", word_wrap=False)
        )

    def action_merge(self) -> None:
        files = self.query_one(OptionList)
        if files.highlighted is None:
            return
        agent = (files.get_option_at_index(files.highlighted).id or "").partition(":")[0]
        if agent in self._reviews:
            self.run_worker(self._merge(agent), group="merge", exclusive=True)

    async def _merge(self, agent: str) -> None:
        """The person's `hive merge AGENT`: its dry run shows what would be merged, asked
        on a ConfirmScreen; only a yes runs the merge."""
        plan = await self._hive(verbs.merge(agent, dry_run=True), b"")
        said = plan.out.rstrip("\n")
        if plan.code == 0 and said.endswith(DRY_RUN_ENDS):
            asked = said.removesuffix(DRY_RUN_ENDS).rstrip("\n")
            if await self.app.push_screen_wait(ConfirmScreen(f"{asked}\n\nMerge?")):
                merged = await self._hive(verbs.merge(agent, dry_run=False), b"")
                # The plan again, which the person has just read, then what was done.
                said = merged.out.rstrip("\n").removeprefix(asked).lstrip("\n")
                said = "\n".join(t for t in (said, merged.err.strip()) if t)
            else:
                said = "not merged."
        else:
            said = "\n".join(t for t in (said, plan.err.strip()) if t)
        result = self.query_one("#diff-result", Static)
        result.update(Text(said.removeprefix("hive: ")))
        result.display = True
        await self._refresh()
