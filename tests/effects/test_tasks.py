"""The task ledger: merge rules (pure), its file, and `hive task` (who may write what)."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_core import mail
from hive_core.cli.group import cli
from hive_core.paths import HivePaths
from hive_core.schema import Draft, Ledger, Task, TaskQuestion
from hive_core.team import tasks
from hive_core.team.tasks import (
    ChangeRefused,
    InvalidValue,
    LedgerUnreadable,
    RawLedger,
    TaskNotFound,
)

NOW = "2026-11-30T09:00:00.000Z"
LATER = "2026-11-30T10:00:00.000Z"
TEAM = frozenset({"michael", "jim", "pam"})
HIVE_BIN = Path(sys.executable).parent / "hive"


def ledger_of(*titles: str) -> RawLedger:
    ledger = tasks.empty_ledger()
    for title in titles:
        ledger, _ = tasks.add_task(ledger, title, assignable=TEAM, now=NOW)
    return ledger


def raw(ledger: RawLedger, task_id: str) -> dict[str, Any]:
    return next(item for item in ledger["tasks"] if item["id"] == task_id)


# --- ids --------------------------------------------------------------------------------


def test_new_tasks_get_the_next_t_number() -> None:
    ledger = ledger_of("a", "b")
    assert [t.id for t in tasks.tasks_of(ledger)] == ["t1", "t2"]
    ledger, chosen = tasks.add_task(ledger, "c", assignable=TEAM, now=NOW, task_id="t7")
    ledger, after = tasks.add_task(ledger, "d", assignable=TEAM, now=NOW)
    assert (chosen.id, after.id) == ("t7", "t8")
    ledger, named = tasks.add_task(ledger, "e", assignable=TEAM, now=NOW, task_id="release-1.0")
    assert named.id == "release-1.0"
    assert tasks.next_task_id(ledger) == "t9"


def test_a_new_task_has_every_field_and_both_times() -> None:
    ledger, added = tasks.add_task(
        tasks.empty_ledger(),
        "  Parse office.toml  ",
        assignable=TEAM,
        now=NOW,
        spec="Load it",
        assignee="jim",
        priority=1,
    )
    assert added == Task(
        id="t1",
        title="Parse office.toml",
        spec="Load it",
        assignee="jim",
        priority=1,
        created_at=NOW,
        updated_at=NOW,
    )
    assert set(raw(ledger, "t1")) == {f.name for f in msgspec.structs.fields(Task)}


@pytest.mark.parametrize("bad", ["", "has space", "a/b", ".hidden", "x" * 65])
def test_a_chosen_id_must_be_a_plain_token(bad: str) -> None:
    with pytest.raises(InvalidValue):
        tasks.add_task(tasks.empty_ledger(), "a", assignable=TEAM, now=NOW, task_id=bad)


def test_a_taken_id_is_refused() -> None:
    with pytest.raises(ChangeRefused, match="already a task 't1'"):
        tasks.add_task(ledger_of("a"), "b", assignable=TEAM, now=NOW, task_id="t1")


@pytest.mark.parametrize("title", ["", "   ", "two\nlines", "x" * 201])
def test_a_title_is_one_short_line(title: str) -> None:
    with pytest.raises(InvalidValue, match="one line"):
        tasks.add_task(tasks.empty_ledger(), title, assignable=TEAM, now=NOW)


# --- merging ----------------------------------------------------------------------------


def test_an_update_changes_only_the_named_fields_and_the_time() -> None:
    ledger, _ = tasks.add_task(
        tasks.empty_ledger(), "a", assignable=TEAM, now=NOW, spec="S", assignee="jim"
    )
    ledger, updated = tasks.update_task(
        ledger, "t1", {"status": "doing"}, assignable=TEAM, now=LATER
    )
    assert (updated.status, updated.spec, updated.assignee) == ("doing", "S", "jim")
    assert (updated.created_at, updated.updated_at) == (NOW, LATER)


def test_explicit_null_clears_to_the_schema_default() -> None:
    ledger = ledger_of("a", "b")
    ledger, _ = tasks.update_task(
        ledger,
        "t2",
        {
            "spec": "S",
            "assignee": "pam",
            "status": "review",
            "priority": 0,
            "depends_on": ["t1"],
            "result": "R",
        },
        assignable=TEAM,
        now=NOW,
    )
    ledger, cleared = tasks.update_task(
        ledger, "t2", dict.fromkeys(tasks.CLEARED), assignable=TEAM, now=LATER
    )
    assert cleared == Task(id="t2", title="b", created_at=NOW, updated_at=LATER)
    assert raw(ledger, "t2")["assignee"] is None  # written as null, not dropped
    assert raw(ledger, "t2")["depends_on"] == []


@pytest.mark.parametrize("field", ["title", "id", "created_at", "questions"])
def test_fields_without_a_default_or_with_their_own_operation_cannot_be_cleared(
    field: str,
) -> None:
    with pytest.raises(InvalidValue):
        tasks.update_task(ledger_of("a"), "t1", {field: None}, assignable=TEAM, now=NOW)


def test_unknown_task_is_not_found() -> None:
    with pytest.raises(TaskNotFound, match="no task 't9'"):
        tasks.update_task(ledger_of("a"), "t9", {"status": "doing"}, assignable=TEAM, now=NOW)


@pytest.mark.parametrize("status", tasks.TASK_STATUSES)
def test_every_status_of_the_schema_is_accepted(status: str) -> None:
    _, updated = tasks.update_task(
        ledger_of("a"), "t1", {"status": status}, assignable=TEAM, now=NOW
    )
    assert updated.status == status


@pytest.mark.parametrize("status", ["started", "DONE", "", 3])
def test_other_statuses_are_refused(status: object) -> None:
    with pytest.raises(InvalidValue, match="status"):
        tasks.update_task(ledger_of("a"), "t1", {"status": status}, assignable=TEAM, now=NOW)


@pytest.mark.parametrize("priority", [-1, tasks.PRIORITY_MAX + 1, True, "1", 1.5])
def test_priority_is_a_small_whole_number(priority: object) -> None:
    with pytest.raises(InvalidValue, match="priority"):
        tasks.update_task(ledger_of("a"), "t1", {"priority": priority}, assignable=TEAM, now=NOW)


def test_the_assignee_must_be_able_to_take_tasks() -> None:
    with pytest.raises(ChangeRefused, match="'kevin' cannot take tasks"):
        tasks.assign_task(ledger_of("a"), "t1", "kevin", assignable=TEAM, now=NOW)
    _, assigned = tasks.assign_task(ledger_of("a"), "t1", "pam", assignable=TEAM, now=NOW)
    assert assigned.assignee == "pam"


def test_a_task_held_by_someone_who_left_can_still_be_edited() -> None:
    ledger, _ = tasks.assign_task(ledger_of("a"), "t1", "jim", assignable=TEAM, now=NOW)
    _, updated = tasks.update_task(
        ledger, "t1", {"status": "doing"}, assignable=frozenset({"pam"}), now=NOW
    )
    assert (updated.assignee, updated.status) == ("jim", "doing")


def test_unknown_change_names_are_refused() -> None:
    with pytest.raises(InvalidValue, match="'colour' is not a task field"):
        tasks.update_task(ledger_of("a"), "t1", {"colour": "red"}, assignable=TEAM, now=NOW)


def test_done_records_the_result() -> None:
    _, finished = tasks.complete_task(ledger_of("a"), "t1", "Merged in src/", now=LATER)
    assert (finished.status, finished.result, finished.updated_at) == (
        "done",
        "Merged in src/",
        LATER,
    )
    with pytest.raises(InvalidValue, match="result is empty"):
        tasks.complete_task(ledger_of("a"), "t1", "  ", now=LATER)


def test_operations_never_mutate_their_input() -> None:
    ledger = ledger_of("a", "b")
    ledger["extra"] = {"nested": [1]}
    before = copy.deepcopy(ledger)
    tasks.add_task(ledger, "c", assignable=TEAM, now=LATER, depends_on=["t1"])
    tasks.update_task(
        ledger, "t2", {"depends_on": ["t1"], "spec": None}, assignable=TEAM, now=LATER
    )
    tasks.complete_task(ledger, "t1", "r", now=LATER)
    asked, _ = tasks.ask_question(ledger, "t1", "q?", asked_by="michael", now=LATER)
    asked_copy = copy.deepcopy(asked)
    tasks.answer_question(asked, "t1", "yes", now=LATER)
    assert ledger == before
    assert asked == asked_copy


# --- dependencies -----------------------------------------------------------------------


def test_dependencies_must_exist() -> None:
    with pytest.raises(ChangeRefused, match="no task 't5' for t1 to depend on"):
        tasks.update_task(ledger_of("a"), "t1", {"depends_on": ["t5"]}, assignable=TEAM, now=NOW)
    with pytest.raises(ChangeRefused):
        tasks.add_task(ledger_of("a"), "b", assignable=TEAM, now=NOW, depends_on=["t5"])


def test_a_task_cannot_depend_on_itself() -> None:
    with pytest.raises(ChangeRefused, match="itself"):
        tasks.update_task(ledger_of("a"), "t1", {"depends_on": ["t1"]}, assignable=TEAM, now=NOW)


def test_a_cycle_is_refused_and_named() -> None:
    ledger = ledger_of("a", "b", "c")
    ledger, _ = tasks.update_task(ledger, "t2", {"depends_on": ["t1"]}, assignable=TEAM, now=NOW)
    ledger, _ = tasks.update_task(ledger, "t3", {"depends_on": ["t2"]}, assignable=TEAM, now=NOW)
    with pytest.raises(ChangeRefused, match=r"cycle \(t1 -> t3 -> t2 -> t1\)"):
        tasks.update_task(ledger, "t1", {"depends_on": ["t3"]}, assignable=TEAM, now=NOW)


def test_repeated_dependencies_are_kept_once_in_order() -> None:
    ledger = ledger_of("a", "b", "c")
    _, updated = tasks.update_task(
        ledger, "t3", {"depends_on": ["t2", "t1", "t2"]}, assignable=TEAM, now=NOW
    )
    assert updated.depends_on == ["t2", "t1"]


def _acyclic(ledger: RawLedger) -> bool:
    graph = {t.id: t.depends_on for t in tasks.tasks_of(ledger)}
    remaining = dict(graph)
    while remaining:
        free = [n for n, deps in remaining.items() if not set(deps) & set(remaining)]
        if not free:
            return False
        for node in free:
            del remaining[node]
    return True


@given(st.lists(st.tuples(st.integers(1, 6), st.lists(st.integers(1, 6), max_size=3))))
def test_no_sequence_of_dependency_changes_makes_a_cycle(
    edits: list[tuple[int, list[int]]],
) -> None:
    ledger = ledger_of(*"abcdef")
    for task_number, deps in edits:
        with contextlib.suppress(ChangeRefused):
            ledger, _ = tasks.update_task(
                ledger,
                f"t{task_number}",
                {"depends_on": [f"t{d}" for d in deps]},
                assignable=TEAM,
                now=NOW,
            )
        assert _acyclic(ledger)


# --- questions for the person -----------------------------------------------------------


def test_questions_are_asked_and_answered_oldest_first() -> None:
    ledger = ledger_of("a")
    ledger, _ = tasks.ask_question(ledger, "t1", "Drop 3.10?", asked_by="michael", now=NOW)
    ledger, _ = tasks.ask_question(ledger, "t1", "Budget?", asked_by="michael", now=NOW)
    ledger, answered = tasks.answer_question(ledger, "t1", "Yes", now=LATER)
    first, second = answered.questions
    assert (first.question, first.answer, first.answered_at) == ("Drop 3.10?", "Yes", LATER)
    assert (first.asked_by, first.asked_at) == ("michael", NOW)
    assert second.answer is None
    assert answered.status == "todo"  # asking or answering leaves the status alone
    ledger, answered = tasks.answer_question(ledger, "t1", "None", now=LATER)
    assert answered.questions[1].answer == "None"
    with pytest.raises(ChangeRefused, match="no open question"):
        tasks.answer_question(ledger, "t1", "again", now=LATER)
    with pytest.raises(ChangeRefused, match="already answered"):
        tasks.answer_question(ledger, "t1", "again", now=LATER, index=0)
    with pytest.raises(ChangeRefused, match="no question #3"):
        tasks.answer_question(ledger, "t1", "again", now=LATER, index=2)


def test_empty_questions_and_answers_are_refused() -> None:
    with pytest.raises(InvalidValue):
        tasks.ask_question(ledger_of("a"), "t1", " ", asked_by="human", now=NOW)
    ledger, _ = tasks.ask_question(ledger_of("a"), "t1", "q?", asked_by="human", now=NOW)
    with pytest.raises(InvalidValue):
        tasks.answer_question(ledger, "t1", "", now=NOW)


# --- unknown fields survive everything --------------------------------------------------

TASK_FIELDS = {f.name for f in msgspec.structs.fields(Task)}
QUESTION_FIELDS = {f.name for f in msgspec.structs.fields(TaskQuestion)}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def unknown_fields(known: set[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda key: key not in known),
        json_values,
        max_size=3,
    )


task_index = st.integers(1, 4)  # t4 may not exist yet: not-found is an outcome too
change_values = (
    st.none()
    | st.text(max_size=6)
    | st.integers(-1, 5)
    | st.sampled_from([*tasks.TASK_STATUSES, *sorted(TEAM), "kevin"])
    | st.lists(st.sampled_from(["t1", "t2", "t3", "t4"]), max_size=2)
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.text(min_size=1, max_size=8)),
        st.tuples(
            st.just("update"),
            task_index,
            st.dictionaries(st.sampled_from(tasks.CHANGEABLE), change_values, max_size=3),
        ),
        st.tuples(st.just("assign"), task_index, st.sampled_from([*sorted(TEAM), "kevin"])),
        st.tuples(st.just("done"), task_index, st.text(max_size=6)),
        st.tuples(st.just("ask"), task_index, st.text(max_size=6)),
        st.tuples(st.just("answer"), task_index, st.text(max_size=6)),
    ),
    max_size=10,
)


def apply(ledger: RawLedger, op: tuple[Any, ...]) -> RawLedger:
    kind, *args = op
    if kind == "add":
        return tasks.add_task(ledger, args[0], assignable=TEAM, now=LATER)[0]
    task_id = f"t{args[0]}"
    if kind == "update":
        return tasks.update_task(ledger, task_id, args[1], assignable=TEAM, now=LATER)[0]
    if kind == "assign":
        return tasks.assign_task(ledger, task_id, args[1], assignable=TEAM, now=LATER)[0]
    if kind == "done":
        return tasks.complete_task(ledger, task_id, args[1], now=LATER)[0]
    if kind == "ask":
        return tasks.ask_question(ledger, task_id, args[1], asked_by="michael", now=LATER)[0]
    return tasks.answer_question(ledger, task_id, args[1], now=LATER)[0]


@settings(max_examples=200, deadline=None)
@given(
    top=unknown_fields({"tasks"}),
    per_task=st.lists(unknown_fields(TASK_FIELDS), min_size=1, max_size=3),
    per_question=unknown_fields(QUESTION_FIELDS),
    ops=operations,
)
def test_unknown_fields_survive_every_operation_and_the_file(
    top: dict[str, Any],
    per_task: list[dict[str, Any]],
    per_question: dict[str, Any],
    ops: list[tuple[Any, ...]],
) -> None:
    ledger = ledger_of(*(f"task {i}" for i in range(len(per_task))))
    ledger = {
        **top,
        "tasks": [{**item, **extra} for item, extra in zip(ledger["tasks"], per_task, strict=True)],
    }
    ledger["tasks"][0]["questions"] = [{"question": "Old?", **per_question}]

    def kept(current: RawLedger) -> None:
        assert {k: current[k] for k in top} == top
        for index, extra in enumerate(per_task):
            item = raw(current, f"t{index + 1}")
            assert {k: item[k] for k in extra} == extra
        old_question = raw(current, "t1")["questions"][0]
        assert {k: old_question[k] for k in per_question} == per_question

    for op in ops:
        # A refused change leaves the ledger as it was; that is checked all the same.
        with contextlib.suppress(tasks.LedgerError):
            ledger = apply(ledger, op)
        kept(ledger)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tasks.json"
        tasks.save_ledger(path, ledger)
        assert tasks.load_ledger(path) == ledger
        msgspec.json.decode(path.read_bytes(), type=Ledger)  # the app's reader still reads it


# --- the file ---------------------------------------------------------------------------


def test_a_missing_file_is_an_empty_ledger(tmp_path: Path) -> None:
    assert tasks.load_ledger(tmp_path / "tasks.json") == {"tasks": []}


def test_a_ledger_without_tasks_key_is_empty_and_keeps_its_fields() -> None:
    assert tasks.parse_ledger(b'{"version": 3}', "tasks.json") == {"version": 3, "tasks": []}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "top level must be an object"),
        (b'{"tasks": {}}', '"tasks" must be a list'),
        (b'{"tasks": [1]}', "task #1 is not an object"),
        (b'{"tasks": [{"id": "t1"}]}', "task #1"),
        (
            b'{"tasks": [{"id": "t1", "title": "a", "status": "started", '
            b'"created_at": "x", "updated_at": "x"}]}',
            "task #1",
        ),
        (
            b'{"tasks": [{"id": "t1", "title": "a", "created_at": "x", "updated_at": "x"},'
            b' {"id": "t1", "title": "b", "created_at": "x", "updated_at": "x"}]}',
            "two tasks have the id 't1'",
        ),
        (b'{"tasks": [' + b"[" * 1000 + b"]" * 1000 + b"]}", "nested 1002 levels deep"),
    ],
)
def test_a_corrupt_ledger_is_a_clear_error(data: bytes, why: str) -> None:
    with pytest.raises(LedgerUnreadable, match="not a valid task ledger") as raised:
        tasks.parse_ledger(data, "tasks.json")
    assert why in str(raised.value)
    assert "Nothing was changed" in str(raised.value)


def test_saved_ledger_is_indented_json_the_app_reads(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    ledger, _ = tasks.add_task(tasks.empty_ledger(), "a", assignable=TEAM, now=NOW)
    tasks.save_ledger(path, ledger)
    text = path.read_text()
    assert text.startswith('{\n  "tasks": [') and text.endswith("\n")
    assert msgspec.json.decode(text, type=Ledger).tasks[0].title == "a"
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.json"]  # no temp file left


# --- `hive task` ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _answering(request: pytest.FixtureRequest) -> None:
    """A ledger write needs the office to prove the writer: wherever a test has an
    office, it answers who is calling (conftest.proving)."""
    if "office_home" in request.fixturenames:
        request.getfixturevalue("proving")


def hive(
    paths: HivePaths, *args: str, agent: str | None = None, stdin: str | None = None
) -> Result:
    env = {"HIVE_HOME": str(paths.home), "HIVE_AGENT_ID": agent, "HIVE_SECRET": None}
    return CliRunner(env=env).invoke(cli, ["task", *args], input=stdin)


def drafts(paths: HivePaths, who: str) -> list[Draft]:
    files = mail.message_files(paths.mailbox(who).outbox)
    return [msgspec.json.decode(f.read_bytes(), type=Draft) for f in files]


def all_outboxes(paths: HivePaths) -> list[str]:
    return sorted(
        f"{who}/{name}"
        for who in os.listdir(paths.agents_dir)
        for name in os.listdir(paths.mailbox(who).outbox)
        if not name.startswith(".")
    ) + [n for n in os.listdir(paths.mailbox("human").outbox) if not n.startswith(".")]


def ledger_on_disk(paths: HivePaths) -> Ledger:
    return msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def test_manager_adds_assigns_updates_and_closes(office_home: HivePaths) -> None:
    paths = office_home
    out = ok(hive(paths, "add", "Parse office.toml", "--spec", "Use tomllib.", agent="michael"))
    assert out.stdout.startswith("added t1: Parse office.toml")
    assert drafts(paths, "michael") == []  # unassigned: nobody to tell
    ok(hive(paths, "add", "Ship", "--depends-on", "t1", "--priority", "1", agent="michael"))

    out = ok(hive(paths, "assign", "t1", "jim", agent="michael"))
    assert "t1 assigned to jim" in out.stdout
    assert drafts(paths, "michael") == [
        Draft(
            to="jim",
            act="request",
            subject="task t1: Parse office.toml",
            body="Use tomllib.",
            task="t1",
        )
    ]

    ok(hive(paths, "update", "t1", "--status", "doing", "--title", "Parse it", agent="michael"))
    ok(
        hive(
            paths, "update", "t2", "--clear", "depends-on", "--question", "Tag it?", agent="michael"
        )
    )
    out = ok(hive(paths, "done", "t1", "--result", "In src/config.py", agent="michael"))
    assert "t1 done" in out.stdout

    first, second = ledger_on_disk(paths).tasks
    assert (first.title, first.assignee, first.status, first.result) == (
        "Parse it",
        "jim",
        "done",
        "In src/config.py",
    )
    assert (second.depends_on, second.priority) == ([], 1)
    assert [(q.question, q.asked_by) for q in second.questions] == [("Tag it?", "michael")]
    assert len(drafts(paths, "michael")) == 1  # closing a task mails nobody


def test_add_with_an_assignee_tells_the_assignee(office_home: HivePaths) -> None:
    result = ok(
        hive(
            office_home,
            "add",
            "Fix CI",
            "--assignee",
            "pam",
            "--spec",
            "-",
            agent="michael",
            stdin="The router test times out.\n",
        )
    )
    assert "added t1: Fix CI (assigned to pam)" in result.stdout
    (draft,) = drafts(office_home, "michael")
    assert (draft.to, draft.act, draft.task, draft.body) == (
        "pam",
        "request",
        "t1",
        "The router test times out.\n",
    )


def test_assigning_to_the_same_agent_again_changes_nothing(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "a", "--assignee", "jim", agent="michael"))
    before = office_home.tasks.read_bytes()
    result = ok(hive(office_home, "assign", "t1", "jim", agent="michael"))
    assert "already assigned to jim" in result.stdout
    assert office_home.tasks.read_bytes() == before
    assert len(drafts(office_home, "michael")) == 1


def test_a_task_without_spec_still_tells_the_assignee_something(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "a", agent="michael"))
    ok(hive(office_home, "assign", "t1", "jim", agent="michael"))
    assert drafts(office_home, "michael")[0].body.strip()


def test_the_manager_taking_a_task_mails_nobody(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "a", "--assignee", "michael", agent="michael"))
    assert all_outboxes(office_home) == []


def test_the_person_may_write_and_their_assignment_comes_from_them(
    office_home: HivePaths,
) -> None:
    ok(hive(office_home, "add", "a", "--assignee", "jim"))
    ok(hive(office_home, "done", "t1", "--result", "done by hand"))
    assert ledger_on_disk(office_home).tasks[0].status == "done"
    assert [d.to for d in drafts(office_home, "human")] == ["jim"]


@pytest.mark.parametrize(
    "args",
    [
        ("add", "Sneaky"),
        ("assign", "t1", "jim"),
        ("update", "t1", "--status", "done"),
        ("update", "t1", "--question", "Why?"),
    ],
)
def test_a_workers_write_is_refused_and_nothing_changes(
    office_home: HivePaths, args: tuple[str, ...]
) -> None:
    ok(hive(office_home, "add", "a", agent="michael"))
    before = office_home.tasks.read_bytes()
    result = hive(office_home, *args, agent="jim")
    assert result.exit_code == 1
    assert "only the manager (michael) changes the task ledger" in result.stderr
    assert "hive task done ID --result" in result.stderr
    assert office_home.tasks.read_bytes() == before
    assert all_outboxes(office_home) == []


def test_a_workers_done_mails_the_manager_and_leaves_the_ledger(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "Parse office.toml", "--assignee", "jim", agent="michael"))
    before = office_home.tasks.read_bytes()
    result = ok(hive(office_home, "done", "t1", "--result", "Parser in src/config.py", agent="jim"))
    assert "The manager (michael) records t1 as done" in result.stdout
    assert office_home.tasks.read_bytes() == before
    outbox = [n for n in os.listdir(office_home.mailbox("jim").outbox) if not n.startswith(".")]
    assert len(outbox) == 1
    assert drafts(office_home, "jim") == [
        Draft(
            to="god",
            act="done",
            subject="done: Parse office.toml",
            body="Parser in src/config.py",
            task="t1",
        )
    ]


def test_a_workers_done_on_an_unknown_task_writes_nothing(office_home: HivePaths) -> None:
    result = hive(office_home, "done", "t9", "--result", "x", agent="jim")
    assert result.exit_code == 1
    assert "no task 't9'" in result.stderr
    assert all_outboxes(office_home) == []


def test_a_long_title_makes_a_subject_within_the_limit(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "x" * 200, agent="michael"))
    ok(hive(office_home, "done", "t1", "--result", "r", agent="jim"))
    (draft,) = drafts(office_home, "jim")
    assert len(draft.subject) == 200 and draft.subject.endswith("…")


def test_list_json_decodes_into_the_ledger_and_keeps_unknown_fields(
    office_home: HivePaths,
) -> None:
    ok(hive(office_home, "add", "a", "--assignee", "jim", agent="michael"))
    ok(hive(office_home, "add", "b", agent="michael"))
    ok(hive(office_home, "update", "t2", "--status", "doing", agent="michael"))
    data = msgspec.json.decode(office_home.tasks.read_bytes())
    data["tasks"][0]["estimate"] = "2d"
    office_home.tasks.write_bytes(msgspec.json.encode(data))

    listed = ok(hive(office_home, "list", "--json", agent="pam")).stdout
    ledger = msgspec.json.decode(listed, type=Ledger)
    assert [t.id for t in ledger.tasks] == ["t1", "t2"]
    assert msgspec.json.decode(listed)["tasks"][0]["estimate"] == "2d"

    mine = msgspec.json.decode(
        hive(office_home, "list", "--json", "--mine", agent="jim").stdout, type=Ledger
    )
    assert [t.id for t in mine.tasks] == ["t1"]
    doing = msgspec.json.decode(
        hive(office_home, "list", "--json", "--status", "doing").stdout, type=Ledger
    )
    assert [t.id for t in doing.tasks] == ["t2"]


def test_list_as_text(office_home: HivePaths) -> None:
    assert "No tasks yet." in ok(hive(office_home, "list")).stdout
    ok(hive(office_home, "add", "Parse", "--assignee", "jim", agent="michael"))
    ok(hive(office_home, "add", "Ship", "--depends-on", "t1", agent="michael"))
    ok(hive(office_home, "update", "t2", "--question", "Tag?", agent="michael"))
    out = ok(hive(office_home, "list")).stdout
    assert "2 tasks:" in out
    assert "t1  todo     p2   jim  Parse" in out
    assert "[waits for t1; 1 question(s) for the person]" in out
    assert "No tasks match." in ok(hive(office_home, "list", "--mine", agent="pam")).stdout


def test_updates_keep_unknown_fields_on_disk(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "a", agent="michael"))
    data = msgspec.json.decode(office_home.tasks.read_bytes())
    data["schema"] = 2
    data["tasks"][0]["estimate"] = {"days": 2}
    office_home.tasks.write_bytes(msgspec.json.encode(data))
    ok(hive(office_home, "update", "t1", "--status", "doing", agent="michael"))
    ok(hive(office_home, "assign", "t1", "pam", agent="michael"))
    ok(hive(office_home, "done", "t1", "--result", "r", agent="michael"))
    after = msgspec.json.decode(office_home.tasks.read_bytes())
    assert after["schema"] == 2
    assert after["tasks"][0]["estimate"] == {"days": 2}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("update", "t1", "--status", "started"), 2, "Invalid value for '--status'"),
        (("update", "t1"), 2, "nothing to change"),
        (("update", "t1", "--spec", "x", "--clear", "spec"), 2, "not both"),
        (("update", "t1", "--clear", "title"), 2, "'title' cannot be cleared"),
        (("update", "t1", "--priority", "-3"), 2, "priority"),
        (("update", "t1", "--title", "two\nlines"), 2, "one line"),
        (("update", "t1", "--depends-on", "t1"), 1, "cannot depend on itself"),
        (("update", "t1", "--depends-on", "t7"), 1, "no task 't7'"),
        (("update", "t9", "--status", "doing"), 1, "no task 't9'"),
        (("assign", "t1", "kevin"), 1, "'kevin' cannot take tasks"),
        (("add", "b", "--id", "t1"), 1, "already a task 't1'"),
        (("done", "t1", "--result", " "), 2, "result is empty"),
        (("done", "t1"), 2, "Missing option '--result'"),
    ],
)
def test_refusals_write_nothing(
    office_home: HivePaths, args: tuple[str, ...], code: int, message: str
) -> None:
    ok(hive(office_home, "add", "a", agent="michael"))
    before = office_home.tasks.read_bytes()
    result = hive(office_home, *args, agent="michael")
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert office_home.tasks.read_bytes() == before
    assert all_outboxes(office_home) == []


def test_a_cycle_from_the_command_line_is_refused(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "a", agent="michael"))
    ok(hive(office_home, "add", "b", "--depends-on", "t1", agent="michael"))
    before = office_home.tasks.read_bytes()
    result = hive(office_home, "update", "t1", "--depends-on", "t2", agent="michael")
    assert result.exit_code == 1
    assert "cycle (t1 -> t2 -> t1)" in result.stderr
    assert office_home.tasks.read_bytes() == before


def test_an_archived_agent_cannot_be_given_a_task(office_home: HivePaths) -> None:
    toml = office_home.office_toml.read_text()
    office_home.office_toml.write_text(toml.replace('id = "pete"', 'id = "pete"\narchived = true'))
    ok(hive(office_home, "add", "a", agent="michael"))
    result = hive(office_home, "assign", "t1", "pete", agent="michael")
    assert result.exit_code == 1 and "'pete' cannot take tasks" in result.stderr


def test_a_corrupt_ledger_is_reported_and_left_alone(office_home: HivePaths) -> None:
    office_home.tasks.write_bytes(b'{"tasks": [oops')
    for args, agent in [
        (("list",), None),
        (("add", "a"), "michael"),
        (("done", "t1", "--result", "r"), "jim"),
    ]:
        result = hive(office_home, *args, agent=agent)
        assert result.exit_code == 1
        assert "is not a valid task ledger" in result.stderr
    assert office_home.tasks.read_bytes() == b'{"tasks": [oops'
    assert all_outboxes(office_home) == []


def test_a_deeply_nested_ledger_is_a_sentence_not_a_traceback(office_home: HivePaths) -> None:
    task = {"id": "t1", "title": "a", "created_at": "x", "updated_at": "x"}

    def ledger(extra: str) -> bytes:
        return msgspec.json.encode({"tasks": [task]})[:-3] + f', "extra": {extra}}}]}}'.encode()

    # Unknown fields are kept (DESIGN 9), nested ones too, within the office's limit.
    office_home.tasks.write_bytes(ledger("[" * 20 + "]" * 20))
    assert "t1" in ok(hive(office_home, "list")).stdout
    deep = ledger("[" * 1000 + "]" * 1000)
    office_home.tasks.write_bytes(deep)
    result = hive(office_home, "list")
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "nested 1003 levels deep" in result.stderr
    assert office_home.tasks.read_bytes() == deep


def test_a_missing_ledger_file_is_created_by_the_first_write(office_home: HivePaths) -> None:
    office_home.tasks.unlink()
    assert "No tasks yet." in ok(hive(office_home, "list")).stdout
    ok(hive(office_home, "add", "a", agent="michael"))
    assert [t.id for t in ledger_on_disk(office_home).tasks] == ["t1"]


def test_an_empty_agent_id_is_a_clear_refusal(office_home: HivePaths) -> None:
    result = hive(office_home, "add", "a", agent="")
    assert result.exit_code == 2
    assert "HIVE_AGENT_ID is set but empty" in result.stderr
    assert ledger_on_disk(office_home).tasks == []


def test_every_verb_has_help_with_examples(office_home: HivePaths) -> None:
    for verb in ("list", "add", "assign", "update", "done"):
        result = ok(hive(office_home, verb, "--help"))
        assert f"hive task {verb}" in result.stdout


def test_the_installed_hive_command_has_the_task_verb(office_home: HivePaths) -> None:
    """The console script reaches the task verbs (help runs in the caller's process; the
    verbs themselves are tested above through the same code). The office answering here
    only proves callers (ProvingOffice): it runs no `hive` verb, as it says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["HIVE_HOME"] = str(office_home.home)
    shown = subprocess.run(
        [HIVE_BIN, "task", "--help"], env=env, check=True, capture_output=True, text=True
    ).stdout
    assert all(verb in shown for verb in ("add", "list", "update", "done"))
    refused = subprocess.run([HIVE_BIN, "task", "list"], env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "does not run `hive` verbs" in refused.stderr
