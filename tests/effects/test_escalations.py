"""Issue 14, what waits for the person: the one rule (pure), task questions as items, the
office's answer path (a manager-only escalation marked answered, a task question
answered onto its task), and a permission prompt told to the manager once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.cli import hive
from hive_core.desks.state import AgentState, AgentStates
from hive_core.ids import created_at_of, new_message_id, utc_now_iso
from hive_core.mail import iter_inbox, write_draft
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import (
    HUMAN,
    AgentSpec,
    ControlRequest,
    Draft,
    Message,
    OfficeConfig,
    OfficeSettings,
    Task,
    TaskQuestion,
)
from hive_core.team import tasks
from hive_core.team.escalations import (
    PromptTeller,
    parse_task_item,
    question_items,
    task_item_id,
    waiting,
)
from tests.app.test_app_keys import _home


def mail(sender: str, *, needs_human: bool = False, task: str | None = None) -> Message:
    mid = new_message_id()
    return Message(
        id=mid,
        conversation=mid,
        in_reply_to=None,
        sender=sender,
        to=HUMAN,
        act="query",
        subject=f"from {sender}",
        body="",
        task=task,
        needs_human=needs_human,
        created_at=created_at_of(mid),
    )


def task(task_id: str, *questions: tuple[str, str | None]) -> Task:
    now = utc_now_iso()
    return Task(
        id=task_id,
        title=f"title of {task_id}",
        created_at=now,
        updated_at=now,
        questions=[
            TaskQuestion(question=q, answer=a, asked_by="jim", asked_at=utc_now_iso())
            for q, a in questions
        ],
    )


# --- the rule (pure) ---------------------------------------------------------------------


def test_the_person_mail_and_the_managers_unanswered_escalations_wait_newest_first() -> None:
    old_mine = mail("jim")
    both = mail("pam", needs_human=True)  # to human: a copy to each
    flagged = mail("jim", needs_human=True)
    answered = mail("pam", needs_human=True)
    plain = mail("jim")  # the manager's own mail is not the person's
    listed = waiting([old_mine, both], [both, flagged, answered, plain], {answered.id})
    assert [m.id for m in listed] == [flagged.id, both.id, old_mine.id]
    assert waiting([], [flagged], {flagged.id}) == []


def test_open_task_questions_wait_and_answered_ones_do_not() -> None:
    t = task("t3", ("Drop 3.10?", "yes"), ("Which DB?", None), ("Ship Friday?", None))
    items = waiting([], [], set(), [t])
    assert [m.id for m in items] == [task_item_id("t3", 3), task_item_id("t3", 2)]
    second = items[1]
    assert (second.task, second.sender, second.subject, second.needs_human) == (
        "t3",
        "jim",
        "Which DB?",
        True,
    )
    assert "Question #2 on task t3" in second.body


def test_a_question_that_also_came_by_mail_is_listed_once() -> None:
    """An escalation about a task is answered onto its oldest open question, so that
    question is the mail's item; the newer one is listed on its own."""
    t = task("t3", ("Which DB?", None), ("Ship Friday?", None))
    about = mail("jim", needs_human=True, task="t3")
    items = waiting([about], [about], set(), [t])
    assert {m.id for m in items} == {about.id, task_item_id("t3", 2)}
    # Mail that is not an escalation does not hide a question.
    note = mail("jim", task="t3")
    assert len(question_items([t], [note])) == 2


@pytest.mark.parametrize(
    ("item", "parsed"),
    [
        (task_item_id("t3", 1), ("t3", 0)),
        (task_item_id("a:b", 12), ("a:b", 11)),
        ("task:t3:0", None),
        ("task:t3", None),
        ("task::1", None),
        ("task:t3:x", None),
        # A message's id (new_message_id's shape), fixed so every collection names it alike.
        ("20261130T090100000000Z-aaaaaa", None),
    ],
)
def test_task_item_ids_name_one_question(item: str, parsed: tuple[str, int] | None) -> None:
    assert parse_task_item(item) == parsed


# --- the office's answer path ---------------------------------------------------------------


@pytest.fixture
def paths(short_tmp: Path) -> Iterator[HivePaths]:
    p = _home(short_tmp)
    yield p


async def _route(office: Office) -> None:
    await asyncio.to_thread(office.router.scan_all)


async def test_an_answered_escalation_to_the_manager_waits_no_more_and_stays_the_managers(
    paths: HivePaths,
) -> None:
    office = Office(paths, agents=False, program=hive)
    office.prepare()
    write_draft(
        paths.mailbox("jim"),
        Draft(to="michael", act="query", subject="Budget?", body="Over?", needs_human=True),
    )
    await _route(office)
    [item] = office.person.waiting_for_person()
    reply = await office.person.perform(ControlRequest(cmd="answer", message=item.id, text="Fine."))
    assert reply.ok, reply.error
    assert office.person.waiting_for_person() == []
    # Marked answered, not deleted: the manager still has it unread.
    assert [m.id for m in iter_inbox(paths.mailbox("michael"))] == [item.id]
    assert (paths.mailbox(HUMAN).done / f"{item.id}.json").exists()
    await _route(office)
    answer = next(m for m in iter_inbox(paths.mailbox("michael")) if m.sender == HUMAN)
    assert answer.body.startswith("Fine.") and item.id in answer.body
    again = await office.person.perform(
        ControlRequest(cmd="answer", message=item.id, text="Again.")
    )
    assert not again.ok and "no message" in (again.error or "")


async def test_a_task_question_waits_and_its_answer_goes_on_the_task(paths: HivePaths) -> None:
    office = Office(paths, agents=False, program=hive)
    office.prepare()
    now = utc_now_iso()
    with tasks.locked(paths):
        ledger, _ = tasks.add_task(
            tasks.load_ledger(paths.tasks), "Pick a DB", assignable=["jim"], now=now
        )
        ledger, _ = tasks.ask_question(ledger, "t1", "Postgres or SQLite?", asked_by="jim", now=now)
        tasks.save_ledger(paths.tasks, ledger)
    reply = await office.person.perform(ControlRequest(cmd="escalations"))
    assert reply.ok and task_item_id("t1", 1) in (reply.detail or "")
    [item] = office.person.waiting_for_person()
    assert item.id == task_item_id("t1", 1)
    done = await office.person.perform(
        ControlRequest(cmd="answer", message=item.id, text="SQLite.")
    )
    assert done.ok, done.error
    [t] = tasks.tasks_of(tasks.load_ledger(paths.tasks))
    assert (t.questions[0].answer, len(t.questions)) == ("SQLite.", 1)
    assert office.person.waiting_for_person() == []
    await _route(office)
    answer = next(m for m in iter_inbox(paths.mailbox("michael")) if m.sender == HUMAN)
    assert (answer.task, answer.body.split("\n")[0]) == ("t1", "SQLite.")
    # Answered: the item is gone, and an answer to it is refused.
    again = await office.person.perform(ControlRequest(cmd="answer", message=item.id, text="No."))
    assert not again.ok
    unknown = await office.person.perform(
        ControlRequest(cmd="answer", message=task_item_id("t9", 1), text="No.")
    )
    assert not unknown.ok


# --- a permission prompt left open ---------------------------------------------------------


def _states() -> AgentStates:
    return AgentStates(
        AgentState(spec=AgentSpec(id=a, name=a.title()), manager=a == "michael")
        for a in ("michael", "jim")
    )


def _status(states: AgentStates, agent: str, status: str) -> None:
    with states.edit(agent) as s:
        s.status = status  # type: ignore[assignment]


async def test_a_prompt_left_open_is_told_to_the_manager_once() -> None:
    config = OfficeConfig(office=OfficeSettings(permission_tell_after_s=0.05))
    posted: list[tuple[str, Message]] = []
    teller = PromptTeller(config, lambda to, m: posted.append((to, m)))
    states = _states()
    states.listeners.append(teller.changed)
    with states.edit("jim") as s:
        s.prompt = "Bash: rm -rf build"
        s.status = "waiting"

    async def told(n: int) -> None:
        for _ in range(400):
            if len(posted) >= n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{n} notice(s) expected, got {len(posted)}")

    await told(1)
    [(to, notice)] = posted
    assert to == "michael" and "rm -rf build" in notice.body and notice.sender == "router"
    _status(states, "jim", "waiting")  # the same prompt seen again: no new timer
    assert teller._open == {"jim": None}
    # Closed before its time: nothing is told; the manager's own prompt goes to the person.
    _status(states, "jim", "working")
    _status(states, "jim", "waiting")
    _status(states, "jim", "working")
    assert teller._open == {}
    _status(states, "michael", "waiting")
    await told(2)
    assert posted[1][0] == HUMAN and len(posted) == 2


async def test_the_office_tells_its_manager_of_a_prompt_left_open(short_tmp: Path) -> None:
    paths = _home(short_tmp)
    toml = paths.office_toml.read_text()
    paths.office_toml.write_text(
        toml.replace(
            'manager = "michael"', 'manager = "michael"\npermission_tell_after_s = 0.05', 1
        )
    )
    office = Office(paths, agents=False, program=hive)
    office.prepare()
    with office.states.edit("jim") as s:
        s.prompt = "Bash: make deploy"
        s.status = "waiting"
    for _ in range(500):
        told = [m for m in iter_inbox(paths.mailbox("michael")) if m.id.endswith("-prompt")]
        if told:
            break
        await asyncio.sleep(0.01)
    [notice] = told
    assert notice.subject == "jim waits at a permission prompt" and "make deploy" in notice.body
