"""The task ledger (hive/tasks.json): its merge rules as pure functions, and its I/O.

The ledger is handled as the JSON objects it was read as, not as Task Structs: a
Struct drops the fields it does not know, and writers must keep them (DESIGN 9), so a
field added by a newer writer survives an older one. Every change validates the known
fields with `msgspec.convert(..., Task)` and writes back the original object with only
the changed fields replaced.

In a change, None clears a field: it goes back to the schema's default (null for
assignee and result, "" for spec, [] for depends_on, 2 for priority, "todo" for
status). Fields without a default (id, title, created_at) cannot be cleared.

Every function here but `locked`, `load_ledger`, `save_ledger` and `retry_as` is pure:
ledgers in, new ledgers out, inputs never mutated. Writers hold `locked(paths)` around
load, change and save, so the manager and the person never lose each other's changes.
`retry_as` is the one whole verb here: the CLI's `hive task retry` and the app's task
screen both run it (their own part is the telling and the sending).
"""

from __future__ import annotations

import copy
import fcntl
import os
import re
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import msgspec

from hive_core import mail
from hive_core.errors import OfficeError
from hive_core.fsio import UnsafeFile, atomic_write, open_regular
from hive_core.ids import utc_now_iso
from hive_core.paths import HivePaths
from hive_core.schema import (
    BODY_MAX,
    JSON_DEPTH_MAX,
    SUBJECT_MAX,
    Draft,
    OfficeConfig,
    Task,
    TaskQuestion,
    TaskStatus,
    json_depth,
)

RawTask = dict[str, Any]
RawLedger = dict[str, Any]

TASK_STATUSES: tuple[str, ...] = get_args(TaskStatus)
# What an update may change; questions have their own operations, the rest is fixed.
CHANGEABLE = ("title", "spec", "assignee", "status", "priority", "depends_on", "result")
# Ids become file-name-like tokens in messages and commands: no spaces, no slashes.
TASK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_AUTO_ID_RE = re.compile(r"^t([0-9]+)$")
NO_SPEC = "No spec was given beyond the title; ask god if it is not enough."


def _schema_defaults() -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for field in msgspec.structs.fields(Task):
        if field.default is not msgspec.NODEFAULT:
            defaults[field.name] = field.default
        elif field.default_factory is not msgspec.NODEFAULT:
            defaults[field.name] = field.default_factory()
    return defaults


# What "cleared" means per field comes from the schema, so the two never disagree.
CLEARED: dict[str, Any] = {
    name: value for name, value in _schema_defaults().items() if name in CHANGEABLE
}
DEFAULT_PRIORITY: int = CLEARED["priority"]
# Lower is more urgent (the Tasks panel lists 1 before 2); a bound keeps it a small int.
PRIORITY_MAX = 99


class LedgerError(OfficeError):
    """The ledger cannot be read or a change is refused; the message says what to do."""


class LedgerUnreadable(LedgerError):
    """tasks.json exists but is not a ledger; it is never overwritten."""


class TaskNotFound(LedgerError):
    """No task has the given id."""


class ChangeRefused(LedgerError):
    """The change conflicts with the ledger or the roster (a cycle, an unknown id)."""


class InvalidValue(LedgerError):
    """A value is wrong in itself (a status that does not exist, a two-line title)."""


# --- reading ---------------------------------------------------------------------------


def empty_ledger() -> RawLedger:
    return {"tasks": []}


def parse_ledger(data: bytes, where: str) -> RawLedger:
    """The ledger in `data` as raw objects, every task checked against the schema."""
    depth = json_depth(data)
    if depth > JSON_DEPTH_MAX:
        # Checked before decoding: msgspec would recurse into it and fail with a
        # RecursionError, not a DecodeError.
        raise _unreadable(where, f"JSON nested {depth} levels deep, over {JSON_DEPTH_MAX}")
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        raise _unreadable(where, f"not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise _unreadable(where, 'the top level must be an object {"tasks": [...]}')
    items = raw.setdefault("tasks", [])
    if not isinstance(items, list):
        raise _unreadable(where, '"tasks" must be a list')
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _unreadable(where, f"task #{index + 1} is not an object")
        try:
            task = msgspec.convert(item, Task)
        except msgspec.ValidationError as e:
            raise _unreadable(where, f"task #{index + 1}: {e}") from None
        if task.id in seen:
            raise _unreadable(where, f"two tasks have the id {task.id!r}")
        seen.add(task.id)
    return raw


def _unreadable(where: str, why: str) -> LedgerUnreadable:
    return LedgerUnreadable(
        f"{where} is not a valid task ledger ({why}); fix it by hand or restore it from "
        "the hive's git history (`git log -p tasks.json` in the hive). Nothing was changed."
    )


def tasks_of(ledger: RawLedger) -> list[Task]:
    return [msgspec.convert(item, Task) for item in ledger["tasks"]]


def find_task(ledger: RawLedger, task_id: str) -> Task:
    return msgspec.convert(ledger["tasks"][_index(ledger, task_id)], Task)


def normalized(raw: RawTask) -> RawTask:
    """The task with every known field present (defaults filled), unknown fields kept."""
    return {**raw, **msgspec.to_builtins(msgspec.convert(raw, Task))}


def _index(ledger: RawLedger, task_id: str) -> int:
    for index, item in enumerate(ledger["tasks"]):
        if item.get("id") == task_id:
            return index
    raise TaskNotFound(f"there is no task {task_id!r}; `hive task list` shows the ids.")


def next_task_id(ledger: RawLedger) -> str:
    """`t<N>`, one past the highest t-number ever used, so no id is handed out twice."""
    numbers = [
        int(match.group(1))
        for item in ledger["tasks"]
        if isinstance(item.get("id"), str) and (match := _AUTO_ID_RE.match(item["id"]))
    ]
    return f"t{max(numbers, default=0) + 1}"


# --- changing ---------------------------------------------------------------------------


def add_task(
    ledger: RawLedger,
    title: str,
    *,
    assignable: Collection[str],
    now: str,
    task_id: str | None = None,
    spec: str = "",
    assignee: str | None = None,
    priority: int = DEFAULT_PRIORITY,
    depends_on: Iterable[str] = (),
) -> tuple[RawLedger, Task]:
    """A new task at the end of the ledger, with `task_id` or the next `t<N>`."""
    if task_id is None:
        task_id = next_task_id(ledger)
    elif not TASK_ID_RE.match(task_id):
        raise InvalidValue(
            f"{task_id!r} cannot be a task id: use letters, digits, '.', '_' or '-' "
            "(at most 64, starting with a letter or digit), or leave the id to the ledger."
        )
    if any(item.get("id") == task_id for item in ledger["tasks"]):
        raise ChangeRefused(f"there is already a task {task_id!r}; pick another id.")
    blank = Task(id=task_id, title="-", created_at=now, updated_at=now)
    grown = {**ledger, "tasks": [*ledger["tasks"], msgspec.to_builtins(blank)]}
    changes = {
        "title": title,
        "spec": spec,
        "assignee": assignee,
        "priority": priority,
        "depends_on": list(depends_on),
    }
    return update_task(grown, task_id, changes, assignable=assignable, now=now)


def update_task(
    ledger: RawLedger,
    task_id: str,
    changes: Mapping[str, object],
    *,
    assignable: Collection[str],
    now: str,
) -> tuple[RawLedger, Task]:
    """Merge `changes` onto the task: only the named fields change, None clears one.

    `assignable` is who may hold a task (the roster's active agents); it is checked
    only when the assignee changes, so a task held by someone who has since left the
    roster can still be edited.
    """
    index = _index(ledger, task_id)
    merged = dict(ledger["tasks"][index])
    for name, value in changes.items():
        if name not in CHANGEABLE:
            raise InvalidValue(
                f"{name!r} is not a task field that can be changed; use one of "
                f"{', '.join(CHANGEABLE)}."
            )
        if value is None:
            if name not in CLEARED:
                raise InvalidValue(f"a task's {name} cannot be cleared; give a new one instead.")
            merged[name] = copy.deepcopy(CLEARED[name])
        else:
            merged[name] = _checked(name, value, task_id, assignable)
    merged["updated_at"] = now
    tasks = list(ledger["tasks"])
    tasks[index] = merged
    changed = {**ledger, "tasks": tasks}
    if "depends_on" in changes:
        _check_dependencies(changed, task_id)
    return changed, msgspec.convert(merged, Task)


def assign_task(
    ledger: RawLedger, task_id: str, agent_id: str, *, assignable: Collection[str], now: str
) -> tuple[RawLedger, Task]:
    return update_task(ledger, task_id, {"assignee": agent_id}, assignable=assignable, now=now)


def complete_task(
    ledger: RawLedger, task_id: str, result: str, *, now: str
) -> tuple[RawLedger, Task]:
    """Status done, with what was done and where it is."""
    if not result.strip():
        raise InvalidValue("say what was done and where it is: the result is empty.")
    return update_task(
        ledger, task_id, {"status": "done", "result": result}, assignable=(), now=now
    )


def record_checkpoint(
    ledger: RawLedger, task_id: str, text: str, *, by: str, now: str
) -> tuple[RawLedger, Task]:
    """Where the task's worker got to, replacing the last checkpoint (git keeps those)."""
    checkpoint = _text("checkpoint", text)
    if not checkpoint.strip():
        raise InvalidValue("the checkpoint is empty: say what is done and what is next.")
    return _with_fields(
        ledger,
        task_id,
        {"checkpoint": checkpoint, "checkpoint_by": by, "checkpoint_at": now},
        now,
    )


def retry_task(
    ledger: RawLedger, task_id: str, to: str | None, *, assignable: Collection[str], now: str
) -> tuple[RawLedger, Task]:
    """Give the task out again (to `to`, or to whoever holds it): one more attempt, being
    worked on again; its checkpoint is kept for the worker to start from."""
    task = find_task(ledger, task_id)
    assignee = to or task.assignee
    if assignee is None:
        raise ChangeRefused(
            f"task {task_id} has no assignee to retry it; name one with --to AGENT."
        )
    changed, _ = update_task(
        ledger, task_id, {"assignee": assignee, "status": "doing"}, assignable=assignable, now=now
    )
    return _with_fields(changed, task_id, {"attempts": task.attempts + 1}, now)


def assignable(config: OfficeConfig) -> frozenset[str]:
    """Who may be given a task: archived and send-only agents read no mail, so they
    could never learn of one."""
    return frozenset(a.id for a in config.agents if not a.archived and not a.send_only)


def subject_line(prefix: str, title: str) -> str:
    """A message subject about a task: `prefix` and its title, cut to SUBJECT_MAX."""
    subject = prefix + title
    return subject if len(subject) <= SUBJECT_MAX else subject[: SUBJECT_MAX - 1] + "…"


def retry_as(
    paths: HivePaths, config: OfficeConfig, who: str, task_id: str, to: str | None
) -> tuple[Task, Draft | None]:
    """Retry task ID for `who`, who may change the ledger (the manager or the person):
    the ledger written, and the request still to send to the assignee (None: `who`
    holds the task). Refused with a LedgerError (ChangeRefused for mail the assignee
    cannot get) before anything is written."""
    with locked(paths):
        ledger, retried = retry_task(
            load_ledger(paths.tasks), task_id, to, assignable=assignable(config), now=utc_now_iso()
        )
        request = retry_request(config, who, retried)
        save_ledger(paths.tasks, ledger)
    return retried, request


def retried_line(task: Task, request: Draft | None) -> str:
    """What a retry did, in one sentence for whoever asked for it."""
    said = f"{task.id} is attempt {task.attempts}, assigned to {task.assignee}"
    if request is None:
        return f"{said}."
    carries = "the last checkpoint" if task.checkpoint else "the spec (no checkpoint)"
    return f"{said}; the request with {carries} goes to {request.to}."


def retry_request(config: OfficeConfig, who: str, task: Task) -> Draft | None:
    """The request that gives the task out again: where the last attempt got to first,
    then the spec (cut if both would not fit in one message); checked as `who`'s mail."""
    assert task.assignee is not None
    if task.assignee == who:
        return None
    if task.checkpoint:
        start = (
            f"Attempt {task.attempts}. Start from the last checkpoint "
            f"({task.checkpoint_by}, {task.checkpoint_at}):\n{task.checkpoint}"
        )
    else:
        start = f"Attempt {task.attempts}. No checkpoint was recorded: start from the spec."
    spec = task.spec if task.spec.strip() else NO_SPEC
    body = f"{start}\n\nThe task:\n{spec}"
    if len(body.encode()) > BODY_MAX:
        cut = "\n(the spec is cut here; `hive task list --json` has all of it)"
        room = BODY_MAX - len(cut.encode())
        body = body.encode()[:room].decode(errors="ignore") + cut
    draft = Draft(
        to=task.assignee,
        act="request",
        subject=subject_line(f"task {task.id}, attempt {task.attempts}: ", task.title),
        body=body,
        task=task.id,
    )
    problem = mail.draft_problem(config, who, draft)
    if problem:
        raise ChangeRefused(f"cannot tell {draft.to} about {task.id}: {problem}")
    return draft


def _with_fields(
    ledger: RawLedger, task_id: str, fields: Mapping[str, object], now: str
) -> tuple[RawLedger, Task]:
    """Fields only their own operation sets (not `update_task`'s)."""
    index = _index(ledger, task_id)
    merged = {**ledger["tasks"][index], **fields, "updated_at": now}
    tasks = list(ledger["tasks"])
    tasks[index] = merged
    return {**ledger, "tasks": tasks}, msgspec.convert(merged, Task)


def ask_question(
    ledger: RawLedger, task_id: str, question: str, *, asked_by: str, now: str
) -> tuple[RawLedger, Task]:
    """Record a question for the person on the task (the status is left to the caller)."""
    text = _text("question", question)
    if not text.strip():
        raise InvalidValue("the question is empty; say what the person must decide.")
    asked = msgspec.to_builtins(TaskQuestion(question=text, asked_by=asked_by, asked_at=now))
    return _with_questions(ledger, task_id, lambda old: [*old, asked], now)


def answer_question(
    ledger: RawLedger, task_id: str, answer: str, *, now: str, index: int | None = None
) -> tuple[RawLedger, Task]:
    """Record the person's answer to question `index` (0-based), by default the oldest
    one not answered yet. An answered question is refused: ask a new one instead, so
    the record of what was decided is never rewritten."""
    text = _text("answer", answer)
    if not text.strip():
        raise InvalidValue("the answer is empty; write what was decided.")
    questions = find_task(ledger, task_id).questions
    if index is None:
        index = next((i for i, q in enumerate(questions) if q.answer is None), None)
        if index is None:
            raise ChangeRefused(f"task {task_id} has no open question to answer.")
    if not 0 <= index < len(questions):
        raise ChangeRefused(
            f"task {task_id} has {len(questions)} question(s); there is no question #{index + 1}."
        )
    if questions[index].answer is not None:
        raise ChangeRefused(
            f"question #{index + 1} of task {task_id} is already answered; "
            "ask a new question to revisit it."
        )

    def answered(old: list[Any]) -> list[Any]:
        new = list(old)
        new[index] = {**old[index], "answer": text, "answered_at": now}
        return new

    return _with_questions(ledger, task_id, answered, now)


def _with_questions(
    ledger: RawLedger, task_id: str, change: Callable[[list[Any]], list[Any]], now: str
) -> tuple[RawLedger, Task]:
    index = _index(ledger, task_id)
    old = ledger["tasks"][index]
    merged = {**old, "questions": change(list(old.get("questions", []))), "updated_at": now}
    tasks = list(ledger["tasks"])
    tasks[index] = merged
    return {**ledger, "tasks": tasks}, msgspec.convert(merged, Task)


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidValue(f"the {name} must be text.")
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        # A str from argv or a file can hold lone surrogates; JSON cannot carry them.
        raise InvalidValue(f"the {name} is not valid UTF-8; convert it and try again.") from None
    if size > BODY_MAX:
        raise InvalidValue(
            f"the {name} is {size} bytes; the limit is {BODY_MAX}, the size of a message "
            "body. Shorten it or point to a file."
        )
    return value


def _checked(name: str, value: object, task_id: str, assignable: Collection[str]) -> object:
    """`value` as it is stored for field `name`, or an error that says what is wrong."""
    if name == "title":
        title = _text("title", value).strip()
        if not title or "\n" in title or "\r" in title or len(title) > SUBJECT_MAX:
            raise InvalidValue(
                f"a title is one line of 1 to {SUBJECT_MAX} characters; put the details "
                "in the spec."
            )
        return title
    if name in ("spec", "result"):
        return _text(name, value)
    if name == "assignee":
        if not isinstance(value, str) or value not in assignable:
            who = ", ".join(sorted(assignable)) or "nobody"
            raise ChangeRefused(
                f"{value!r} cannot take tasks; give the id of an active agent ({who})."
            )
        return value
    if name == "status":
        if value not in TASK_STATUSES:
            raise InvalidValue(f"{value!r} is not a status; use one of {', '.join(TASK_STATUSES)}.")
        return value
    if name == "priority":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= PRIORITY_MAX:
            raise InvalidValue(
                f"the priority is a whole number from 0 (most urgent) to {PRIORITY_MAX}, "
                f"not {value!r}."
            )
        return value
    # depends_on: the ids it names are checked against the whole ledger afterwards.
    ids = list(dict.fromkeys(value)) if isinstance(value, list | tuple) else None
    if ids is None or not all(isinstance(dep, str) for dep in ids):
        raise InvalidValue("depends_on must be a list of task ids.")
    # A repeated id adds nothing; dict.fromkeys dropped it and kept the first order.
    if task_id in ids:
        raise ChangeRefused(f"task {task_id} cannot depend on itself.")
    return ids


def _check_dependencies(ledger: RawLedger, task_id: str) -> None:
    graph = {item["id"]: list(item.get("depends_on", [])) for item in ledger["tasks"]}
    for dep in graph[task_id]:
        if dep not in graph:
            raise ChangeRefused(
                f"there is no task {dep!r} for {task_id} to depend on; "
                "`hive task list` shows the ids."
            )
    for dep in graph[task_id]:
        path = _path(graph, dep, task_id)
        if path is not None:
            cycle = " -> ".join([task_id, *path])
            raise ChangeRefused(
                f"{task_id} cannot depend on {dep}: that would be a cycle ({cycle}); "
                "remove one of those dependencies first."
            )


def _path(graph: Mapping[str, list[str]], start: str, goal: str) -> list[str] | None:
    """The shortest chain of dependencies from `start` to `goal`, if there is one."""
    parents: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (parent := parents[path[-1]]) is not None:
                path.append(parent)
            return path[::-1]
        for nxt in graph.get(node, []):
            if nxt not in parents:
                parents[nxt] = node
                queue.append(nxt)
    return None


# --- effects ----------------------------------------------------------------------------


@contextmanager
def locked(paths: HivePaths) -> Iterator[None]:
    """Hold the ledger's write lock (HivePaths.tasks_lock: tasks.json itself is replaced
    by rename on every save)."""
    paths.run.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(paths.tasks_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load_ledger(path: Path) -> RawLedger:
    """The ledger in `path`; a missing file is an empty ledger, a corrupt one an error."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return empty_ledger()
    except UnsafeFile as e:
        # An agent can put a FIFO there: never waited on, never overwritten.
        raise LedgerUnreadable(f"{path} is not read: {e} Move it aside.") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    return parse_ledger(data, str(path))


def save_ledger(path: Path, ledger: RawLedger) -> None:
    atomic_write(path, msgspec.json.format(msgspec.json.encode(ledger), indent=2) + b"\n")
