"""SVG snapshots of the app (snapshots/test_app_snapshots/): the default layout, zoom, grid,
each side-panel tab, a narrow 80x24 terminal, a pane showing recorded Claude Code output,
the Log panel zoomed to the whole screen and the help screen. The office runs for real but starts no agent CLIs, over a hive with fixed
content, so every run draws the same screen."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hive_core.cli import hive
from hive_core.hive import init_office, tighten_modes
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import Ledger, LogEvent, Message, Task, TaskQuestion
from hive_tui.app import HiveApp

FIXTURES = Path(__file__).parents[1] / "fixtures"
ROSTER = """\
[office]
name = "Scranton"
manager = "michael"

[[agents]]
id = "michael"
name = "Michael"
role = "Manager"
provider = "claude"

[[agents]]
id = "jim"
name = "Jim"
role = "Engineer"
provider = "claude"

[[agents]]
id = "pam"
name = "Pam"
role = "Engineer"
provider = "claude"

[[agents]]
id = "pete"
name = "Pete"
role = "Research"
provider = "claude"
web = true
"""
BOARD = """\
# Release 2.4

## Goal
Ship the importer rewrite by Friday without breaking the nightly sync.

## Plan
- [x] Split the parser from the loader (jim)
- [ ] Port the CSV edge cases (pam)
- [ ] Check the vendor API limits (pete)

**Risk:** the nightly job still reads the old table; keep it until `sync_v2` is live.
"""
T0 = "2026-11-30T09:00:00Z"


def seed(paths: HivePaths) -> None:
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(ROSTER)
    init_office(paths)
    paths.board.write_text(BOARD)
    tasks = [
        Task(
            id="t1",
            title="Split parser from loader",
            assignee="jim",
            status="done",
            priority=1,
            result="parser.py and loader.py, tests green",
            created_at=T0,
            updated_at=T0,
        ),
        Task(
            id="t2",
            title="Port CSV edge cases",
            assignee="pam",
            status="doing",
            depends_on=["t1"],
            created_at=T0,
            updated_at=T0,
        ),
        Task(
            id="t3",
            title="Vendor API limits",
            assignee="pete",
            status="blocked",
            priority=1,
            questions=[
                TaskQuestion(question="May we pay for the higher rate tier?", asked_by="pete")
            ],
            created_at=T0,
            updated_at=T0,
        ),
    ]
    paths.tasks.write_bytes(msgspec.json.encode(Ledger(tasks=tasks)))
    events = [
        LogEvent(
            ts="2026-11-30T09:01:00.000000Z",
            kind="route",
            msg="20261130T090100000000Z-aaaaaa",
            sender="michael",
            to="jim",
            recipients=["jim"],
            act="request",
            subject="Split the parser",
        ),
        LogEvent(
            ts="2026-11-30T09:02:00.000Z",
            kind="agent",
            agent="jim",
            detail="PreToolUse: Edit: importer/parser.py [idle -> working]",
        ),
        LogEvent(
            ts="2026-11-30T09:05:00.000000Z",
            kind="route",
            msg="20261130T090500000000Z-bbbbbb",
            sender="pete",
            to="human",
            recipients=["michael", "human"],
            act="query",
            subject="Higher rate tier?",
        ),
    ]
    paths.log.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in events))
    question = Message(
        id="20261130T090500000000Z-bbbbbb",
        conversation="20261130T090500000000Z-bbbbbb",
        in_reply_to=None,
        sender="pete",
        to="human",
        act="query",
        subject="Higher rate tier?",
        body="The vendor caps us at 10 req/s. The next tier costs $40/month. May we pay for it?",
        needs_human=True,
        created_at="2026-11-30T09:05:00.000000Z",
    )
    (paths.mailbox("human").inbox / f"{question.id}.json").write_bytes(
        msgspec.json.encode(question)
    )
    # As an office leaves its home: otherwise the office's start-up line about tightening
    # the modes of these hand-made files (with the time of the run) shows in the log.
    tighten_modes(paths)


def make_app(tmp_path: Path) -> HiveApp:
    # In-process: the agents' states are set on the office itself for a fixed screen; a
    # served office takes them only as hook events, logged with the time of the run.
    paths = HivePaths(tmp_path / "home")
    seed(paths)
    office = Office(paths, agents=False, program=hive)
    for agent_id, status, tool in (
        ("michael", "working", "Read"),
        ("jim", "working", "Edit"),
        ("pam", "idle", None),
        ("pete", "waiting", "WebFetch"),
    ):
        with office.states.edit(agent_id) as state:
            state.status = status  # type: ignore[assignment]
            state.last_tool = tool
    return HiveApp(office)


def claude_output() -> bytes:
    return (FIXTURES / "claude_session.bin").read_bytes()


def feed(agent: str, data: bytes) -> Callable[[Any], Awaitable[None]]:
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await pilot.pause()
        app.pane(agent).feed(data)
        await pilot.pause(0.2)

    return run_before


def keys(*pressed: str, data: bytes | None = None) -> Callable[[Any], Awaitable[None]]:
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await pilot.pause()
        if data is not None:
            for agent in app.roster:
                app.pane(agent).feed(data)
        await pilot.press(*pressed)
        await pilot.pause(0.2)

    return run_before


GREETING = (
    b"\x1b[1;32mjim@office\x1b[0m:\x1b[1;34m~/importer\x1b[0m$ pytest -q\r\n"
    b"\x1b[32m42 passed\x1b[0m in 1.31s\r\n"
)


@pytest.mark.parametrize(
    ("name", "size", "run_before"),
    [
        ("default", (160, 48), keys(data=GREETING)),
        ("zoom", (160, 48), keys("ctrl+right_square_bracket", "z", data=GREETING)),
        ("grid", (160, 48), keys("ctrl+right_square_bracket", "g", data=GREETING)),
        ("tab_tasks", (160, 48), keys("ctrl+right_square_bracket", "t")),
        ("tab_log", (160, 48), keys("ctrl+right_square_bracket", "l")),
        ("tab_inbox", (160, 48), keys("ctrl+right_square_bracket", "i")),
        ("tab_memory", (160, 48), keys("ctrl+right_square_bracket", "m")),
        ("narrow_80x24", (80, 24), keys(data=GREETING)),
        # The pane's interior at the recording's 120x40, so Claude Code draws as it did.
        ("claude_pane", (194, 57), feed("michael", claude_output())),
        (
            "log_zoomed",
            (160, 48),
            keys("ctrl+right_square_bracket", "l", "ctrl+right_square_bracket", "z"),
        ),
        ("help", (160, 48), keys("ctrl+right_square_bracket", "question_mark")),
    ],
)
def test_app_snapshot(
    snapshots_in_repo: None,
    snap_compare: Any,
    tmp_path: Path,
    name: str,
    size: tuple[int, int],
    run_before: Callable[[Any], Awaitable[None]],
) -> None:
    assert json.loads((FIXTURES / "claude_session.json").read_text())["term"] == "xterm-256color"
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=run_before)
