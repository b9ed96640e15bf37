"""The app's keys, from two tables: its own view commands (here) and the person's actions
on the office (`hive_core.actions.ACTIONS`). What a key after the prefix does, the help
screen and the key line are all generated from them: a command added to either table
appears in all three.

Pure: nothing here touches the screen or the office.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.cells import cell_len

from hive_core.actions import ACTIONS, BY_NAME, PersonAction


class ViewCommand(NamedTuple):
    """A key after the prefix that changes what the app shows (not the office)."""

    key: str
    """The character after the prefix; "1-9" stands for any of those digits."""
    action: str
    """A Textual action on the app (`panel('board')`); for "1-9", the digit is its argument."""
    help: str
    """One line on the help screen."""
    label: str = ""
    """A word or two for the key line (empty: only on the help screen). Neighbours with
    the same label share one entry (`b/t/l/i/m panels`)."""
    always: bool = False
    """Kept on the key line however narrow the terminal is."""


VIEW_COMMANDS: tuple[ViewCommand, ...] = (
    ViewCommand("1-9", "focus_agent", "focus agent N (roster order)", "agent"),
    ViewCommand("b", "panel('board')", "the board (arrows and page keys scroll it)", "panels"),
    ViewCommand("t", "panel('tasks')", "tasks (arrows pick one, its detail below)", "panels"),
    ViewCommand("l", "panel('log')", "the log (arrows scroll, f/F filter by agent)", "panels"),
    ViewCommand("i", "panel('inbox')", "your inbox and escalations (enter answers one)", "panels"),
    ViewCommand(
        "m", "panel('memory')", "memory search (type, enter; arrows pick a result)", "panels"
    ),
    ViewCommand(
        "z",
        "layout('zoom')",
        "zoom the focused pane or panel to the whole screen (again: back)",
        "zoom",
    ),
    ViewCommand("g", "layout('grid')", "all panes in a grid (again: back)", "grid"),
    ViewCommand("n", "cycle(1)", "next agent", "next/prev"),
    ViewCommand("p", "cycle(-1)", "previous agent", "next/prev"),
    ViewCommand("o", "map", "the office map (arrows pick an agent, enter focuses it)", "map"),
    # `d` is tmux's detach; the changes view takes `v`.
    ViewCommand(
        "v", "diff", "the agents' changes against their base (arrows pick a file, r refreshes)"
    ),
    ViewCommand("s", "send", "send a message to an agent", "send"),
    ViewCommand("+", "hire", "hire an agent: it joins the running office and office.toml"),
    ViewCommand(
        "[",
        "copy_mode",
        "copy mode: arrows/hjkl, pages, g/G, 0/$, w/b move; / ? search, n/N again; "
        "space starts a selection, enter or y copies it; q or esc leaves",
    ),
    ViewCommand("?", "help", "show all keys", "help", always=True),
    ViewCommand(
        "d",
        "detach",
        "detach: the office and its agents keep running (`hive-office` attaches)",
    ),
    ViewCommand(
        "q",
        "quit",
        "quit: asks whether to stop the office (agents stopped, last commit) or detach",
        "quit",
        always=True,
    ),
)
# The person's actions with a key after the prefix. Two share `x`: pause or resume, by
# the agent's state (`person_action`).
KEYED_ACTIONS: tuple[PersonAction, ...] = tuple(a for a in ACTIONS if a.key)
# Not after the prefix: the app's only other keys (keys, key line label, help).
DIRECT_KEYS = (("alt+1..9", "agent", "focus agent N (roster order)"),)


def direct_keys(alt_digits: bool = True) -> tuple[tuple[str, str, str], ...]:
    """DIRECT_KEYS as this office has them: office.toml's `alt_digits = false` leaves
    alt+1..9 to the agent, so no screen lists them."""
    return DIRECT_KEYS if alt_digits else ()


ARMED_MARK = "…"


def view_action(char: str) -> str | None:
    """The Textual action of the view command typed as `char` after the prefix."""
    digit = len(char) == 1 and char in "123456789"
    for command in VIEW_COMMANDS:
        if command.key == "1-9" and digit:
            return f"{command.action}({char})"
        if command.key == char:
            return command.action
    return None


def person_action(char: str, *, held: bool) -> PersonAction | None:
    """The person's action typed as `char` after the prefix; `held` (the agent is paused
    or halted) turns the pause key into resume."""
    action = next((a for a in KEYED_ACTIONS if a.key == char and a.name != "resume"), None)
    if action is not None and action.name == "pause" and held:
        return BY_NAME["resume"]
    return action


class KeyItem(NamedTuple):
    keys: str
    label: str
    always: bool

    def text(self) -> str:
        return f"{self.keys} {self.label}"


def key_items() -> list[KeyItem]:
    """The key line's entries in order: view commands, the person's actions, then what is
    always kept (help, quit)."""
    rows = [(c.key, c.label, c.always) for c in VIEW_COMMANDS if c.label]
    rows += [(a.key or "", a.label, False) for a in KEYED_ACTIONS if a.label]
    rows.sort(key=lambda row: row[2])  # stable: the kept ones go last, in table order
    items: list[KeyItem] = []
    for key, label, always in rows:
        if items and items[-1].label == label and not always:
            last = items[-1]
            items[-1] = last._replace(keys=f"{last.keys}/{key}")
        else:
            items.append(KeyItem(key, label, always))
    return items


SEP = " · "


def key_line(prefix: str, width: int, *, armed: bool = False, alt_digits: bool = True) -> str:
    """The one line of keys at the bottom, at most `width` columns where it can be: the
    full form, or else `? help` and `q quit` and as many other entries as fit, in table
    order. Armed, it starts `ctrl+] …` and lists what the next key can be."""
    head = f" {prefix} {ARMED_MARK} " if armed else f" {prefix} then: "
    items = key_items()
    direct = direct_keys(alt_digits)
    tail = ("   " + SEP.join(f"{k} {label}" for k, label, _ in direct)) if direct else ""

    def line(shown: list[KeyItem], end: str) -> str:
        return head + SEP.join(item.text() for item in shown) + end

    full = line(items, tail)
    if cell_len(full) <= width:
        return full
    kept = [item for item in items if item.always]
    for item in items:
        if not item.always and cell_len(line([*kept, item], "")) <= width:
            kept.append(item)
    kept.sort(key=items.index)
    return line(kept, "")


def help_rows() -> list[tuple[str, str]]:
    """(key after the prefix, what it does) for every command of both tables; the
    person's actions say AGENT for the focused agent."""
    rows = [(c.key, c.help) for c in VIEW_COMMANDS if not c.always]
    rows += [(a.key or "", a.help) for a in KEYED_ACTIONS]
    rows += [(c.key, c.help) for c in VIEW_COMMANDS if c.always]
    return rows
