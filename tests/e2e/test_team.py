"""A team at work, with the real claude CLI and the app: the manager turns the person's goal
into a board and two tasks, the engineers (idle when their mail arrives) are woken once,
reply and report done, one of them asks the person a question the person answers from
the app's escalations, and the ledger, board, inboxes and git history end up right."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import msgspec
import pytest

from hive_core.cli import hive
from hive_core.demo.brains import ManagerBrain, WorkerBrain
from hive_core.demo.office import start_demo
from hive_core.mail import iter_inbox, message_files
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import Ledger, Message
from hive_tui.app import HiveApp
from hive_tui.panels.inbox import InboxPanel
from tests.claude_office import CLAUDE
from tests.support import office_of, until

# A whole delegation by three real claude agents: each step can take a model turn or two.
TEAM_S = 90

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]
QUESTION = "May I drop the legacy import table once the new loader is live?"
ANSWER = "Yes, after one clean nightly run."


def ledger(paths: HivePaths) -> Ledger:
    return msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)


def done_messages(paths: HivePaths, who: str) -> list[Message]:
    decoder = msgspec.json.Decoder(Message)
    return [decoder.decode(p.read_bytes()) for p in message_files(paths.mailbox(who).done)]


async def test_a_team_delivers_and_the_person_answers(
    monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    home = short_tmp / "home"
    home.mkdir()
    brains = {
        "michael": ManagerBrain(),
        "jim": WorkerBrain("jim"),
        "pam": WorkerBrain("pam", ask_person=QUESTION),
    }
    demo = start_demo(home, brains)
    for key, value in demo.env.items():
        monkeypatch.setenv(key, value)
    paths = demo.paths
    app = HiveApp(Office(paths, program=hive))
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            office = office_of(app)
            # Both tasks are reported done and recorded by the manager.
            await until(
                pilot,
                lambda: (
                    paths.tasks.exists()
                    and len(ledger(paths).tasks) == 2
                    and all(t.status == "done" for t in ledger(paths).tasks)
                ),
                "both tasks done",
                TEAM_S,
            )
            # Pam's question reached the person's escalations in the app.
            panel = app.query_one(InboxPanel)
            [question] = await until(
                pilot,
                lambda: [m for m in app.escalations.values() if m.subject == QUESTION],
                "the question in the app's escalations",
                TEAM_S,
            )
            assert question.needs_human and question.task == "t2" and question.sender == "pam"
            # The person answers from the app: Inbox tab, Enter on the message, type, send.
            await pilot.press("ctrl+right_square_bracket", "i")
            panel.focus()
            await pilot.pause()
            panel.post_message(InboxPanel.Open(question.id))
            await until(
                pilot,
                lambda: type(app.screen).__name__ == "AnswerScreen",
                "the answer screen",
                TEAM_S,
            )
            await pilot.press(*ANSWER)
            await pilot.press("ctrl+s")
            answer = await until(
                pilot,
                lambda: [
                    m
                    for m in [
                        *iter_inbox(paths.mailbox("michael")),
                        *done_messages(paths, "michael"),
                    ]
                    if m.sender == "human" and m.body.startswith(ANSWER)
                ],
                "the answer in the manager's mail",
                TEAM_S,
            )
            assert answer[0].task == "t2"
            [t2] = [t for t in ledger(paths).tasks if t.id == "t2"]
            assert [(q.question.startswith(QUESTION), q.answer) for q in t2.questions] == [
                (True, ANSWER)
            ]
            # Everyone is done with their mail.
            await until(
                pilot,
                lambda: not any(list(iter_inbox(paths.mailbox(a))) for a in ("jim", "pam")),
                "the engineers' inboxes empty",
                TEAM_S,
            )
            stats = office.watchdog.stats
            await pilot.press("ctrl+right_square_bracket", "q")
            await until(
                pilot,
                lambda: app._office_worker.is_finished,
                "the office to stop and commit",
                TEAM_S,
            )
    finally:
        demo.stop()

    tasks = {t.id: t for t in ledger(paths).tasks}
    assert tasks["t1"].assignee == "jim" and "42 tests pass" in (tasks["t1"].result or "")
    assert tasks["t2"].assignee == "pam" and "47 tests pass" in (tasks["t2"].result or "")
    board = paths.board.read_text()
    assert "- [x] t1" in board and "- [x] t2" in board
    # The engineers were idle when their task arrived and were woken exactly once for it;
    # pam once more for the person's answer, which comes to her as well as the manager.
    assert stats.nudges("jim") == 1 and stats.nudges("pam") == 2, stats
    for worker in ("jim", "pam"):
        assert (worker, 1) in stats.confirmed
    assert any(
        m.sender == "human" and m.body.startswith(ANSWER) for m in done_messages(paths, "pam")
    ), "pam read the answer to her question"
    assert stats.duplicates == 0
    # The manager heard back from both: an agreement and a done report each.
    reports = [(m.sender, m.act, m.task) for m in done_messages(paths, "michael")]
    for worker, task in (("jim", "t1"), ("pam", "t2")):
        assert (worker, "done", task) in reports and (worker, "agree", task) in reports
    # All of it is in git.
    log = subprocess.run(
        ["git", "-C", str(paths.hive), "log", "-p", "--", "tasks.json", "board.md"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '"status": "done"' in log and "- [x] t2" in log and ANSWER in log
    tracked = subprocess.run(
        ["git", "-C", str(paths.hive), "ls-files"], capture_output=True, text=True, check=True
    ).stdout
    assert sum(f"{m.id}.json" in tracked for m in done_messages(paths, "michael")) >= 5
    status = subprocess.run(
        ["git", "-C", str(paths.hive), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""
    assert json.loads(paths.registry.read_text())["manager"] == "michael"
