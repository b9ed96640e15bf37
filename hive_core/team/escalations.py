"""What waits for the person: one rule, for the office (`hive-office escalations`, the
answer path) and the app's Inbox alike.

Three kinds of item wait: the person's own unread mail; the manager's unread
needs_human mail that did not also come to them and that they have not answered (the
answer leaves a link to the manager's copy in the person's `.done`, so the manager's
copy is kept, marked answered); and the open questions recorded on tasks (`hive task
update --question`). A task question is shown as a Message with an id of its own
(`task:<task>:<n>`, never a file name) so the Inbox, the answer form and the
`escalations`/`answer` verbs treat every item alike.

A permission prompt is the person's to answer in the agent's pane; one left open for
`permission_tell_after_s` is told to the manager once (`PromptTeller`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Collection, Iterable

from hive_core.desks.state import AgentState
from hive_core.ids import new_message_id
from hive_core.routing.rules import router_notice
from hive_core.schema import HUMAN, SUBJECT_MAX, Message, OfficeConfig, Task

# Message ids start with a timestamp, so nothing the router made starts with this.
TASK_ITEM = "task:"


def task_item_id(task_id: str, number: int) -> str:
    """The item of question `number` (1-based, as the person counts) of a task."""
    return f"{TASK_ITEM}{task_id}:{number}"


def parse_task_item(item_id: str) -> tuple[str, int] | None:
    """(task id, 0-based question index) of a task-question item; None for mail."""
    if not item_id.startswith(TASK_ITEM):
        return None
    task_id, sep, number = item_id[len(TASK_ITEM) :].rpartition(":")
    if not sep or not task_id or not number.isdigit() or int(number) < 1:
        return None
    return task_id, int(number) - 1


def question_items(tasks: Iterable[Task], mail: Iterable[Message]) -> list[Message]:
    """The open questions on tasks, as items for the person. A waiting escalation about
    a task is answered onto that task's oldest open question (office/person.py), so
    that many of its oldest open questions are already on the list as the mail itself
    and are not listed twice."""
    by_mail = Counter(m.task for m in mail if m.task and m.needs_human)
    items = []
    for task in tasks:
        open_ones = [(i, q) for i, q in enumerate(task.questions) if q.answer is None]
        for index, question in open_ones[by_mail[task.id] :]:
            text = question.question
            items.append(
                Message(
                    id=task_item_id(task.id, index + 1),
                    conversation=f"{TASK_ITEM}{task.id}",
                    in_reply_to=None,
                    sender=question.asked_by or "?",
                    to=HUMAN,
                    act="query",
                    subject=" ".join(text.split())[:SUBJECT_MAX],
                    body=f"Question #{index + 1} on task {task.id} ({task.title}):\n\n{text}",
                    task=task.id,
                    requires_reply=True,
                    needs_human=True,
                    created_at=question.asked_at or task.updated_at,
                )
            )
    return items


def newest_first(items: Iterable[Message]) -> list[Message]:
    return sorted(items, key=lambda m: (m.created_at, m.id), reverse=True)


def waiting(
    person_mail: Iterable[Message],
    manager_mail: Iterable[Message],
    answered_ids: Collection[str],
    tasks: Iterable[Task] = (),
) -> list[Message]:
    """Everything that waits for the person, newest first: `person_mail` (their unread
    mail), the manager's unread needs_human mail that did not also come to them and is
    not in `answered_ids` (those the person answered), and the tasks' open questions."""
    mine = list(person_mail)
    ids = {m.id for m in mine}
    flagged = [
        m for m in manager_mail if m.needs_human and m.id not in ids and m.id not in answered_ids
    ]
    mail = mine + flagged
    return newest_first(mail + question_items(tasks, mail))


def prompt_notice(state: AgentState, manager: str, open_s: float) -> Message:
    """The notice of a permission prompt left open: to the manager, or to the person
    when the manager is the one asking."""
    to = HUMAN if state.id == manager else manager
    what = state.prompt or "a permission prompt"
    body = (
        f"{state.spec.name} ({state.id}) has waited {open_s:g} s at a permission prompt: "
        f"{what}\nOnly the person can answer it, in {state.id}'s pane"
        + (
            "."
            if to == HUMAN
            else "; if it holds up work, tell them with `hive send --to human`, or give "
            "the work to someone else."
        )
    )
    return router_notice(
        f"{new_message_id()}-prompt", to, f"{state.id} waits at a permission prompt", body
    )


class PromptTeller:
    """The office's side: listens to agent changes; a prompt that opens starts a timer,
    one that closes stops it, and a timer that runs out tells once (the next prompt is
    a new one)."""

    def __init__(self, config: OfficeConfig, post: Callable[[str, Message], None]) -> None:
        self.manager = config.office.manager
        self.after_s = config.office.permission_tell_after_s
        self.post = post
        # Agents at a prompt now, and its timer (None once it has been told).
        self._open: dict[str, asyncio.TimerHandle | None] = {}

    def changed(self, state: AgentState) -> None:
        waiting = state.status == "waiting"
        if waiting == (state.id in self._open):
            return
        if not waiting:
            timer = self._open.pop(state.id)
            if timer is not None:
                timer.cancel()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a state changed outside a running office: nothing to time
            return
        self._open[state.id] = loop.call_later(self.after_s, self._tell, state)

    def _tell(self, state: AgentState) -> None:
        self._open[state.id] = None
        notice = prompt_notice(state, self.manager, self.after_s)
        self.post(notice.to, notice)
