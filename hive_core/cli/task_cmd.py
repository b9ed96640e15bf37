"""`hive task`: the task ledger (hive/tasks.json) from the command line.

Everyone reads the ledger. Two callers write it: the manager, who owns it (DESIGN 9),
and the person (`human`). The person is let in because the office is theirs and the
app already writes for them (their answers to questions land on the tasks); a person
refused here would edit tasks.json by hand, past the validation and the lock. Every
other agent reports with `hive task done ID --result ...`, which does not touch the
ledger: it becomes a `done` message to the manager, who decides what the ledger says.

Giving a task to an agent (`assign`, or `add --assignee`) also mails that agent the
spec as a request from the caller's own outbox, so the assignee learns of it through
the same channel as any other work.

Exit codes as for `hive`: 1 refused or not found, 2 bad usage; nothing is written
when a command fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
import msgspec

from hive_core import mail
from hive_core.caller import Caller
from hive_core.cli.common import (
    BadUsage,
    HiveError,
    click_home,
    home_option,
    open_caller,
    post,
    require_proof,
    text_or_stdin,
)
from hive_core.ids import utc_now_iso
from hive_core.render import clean, preview
from hive_core.schema import HUMAN, Draft, Task
from hive_core.team import tasks

TITLE_WIDTH = 60


def _caller(*, proof: bool = False) -> Caller:
    return open_caller(click_home(), proof=proof)


def _writes(caller: Caller) -> bool:
    return caller.who in (caller.manager, HUMAN)


def _writer() -> Caller:
    """The caller, proven (the office must run), if it may change the ledger."""
    caller = _caller(proof=True)
    if not _writes(caller):
        raise HiveError(
            f"only the manager ({caller.manager}) changes the task ledger: report your own "
            "work with `hive task done ID --result ...` and ask for anything else with "
            "`hive send --to god`."
        )
    return caller


@contextmanager
def _ledger_errors() -> Iterator[None]:
    try:
        yield
    except tasks.InvalidValue as e:
        raise BadUsage(str(e)) from None
    except tasks.LedgerError as e:
        raise HiveError(str(e)) from None


def _assignment(caller: Caller, task: Task) -> Draft | None:
    """The request that tells the assignee about `task`, checked so that a refusal
    comes before anything is written; None when there is nobody else to tell."""
    if task.assignee is None or task.assignee == caller.who:
        return None
    draft = Draft(
        to=task.assignee,
        act="request",
        subject=tasks.subject_line(f"task {task.id}: ", task.title),
        body=task.spec if task.spec.strip() else tasks.NO_SPEC,
        task=task.id,
    )
    problem = mail.draft_problem(caller.config, caller.who, draft)
    if problem:
        raise HiveError(f"cannot tell {draft.to} about {task.id}: {problem}")
    return draft


def _normalise_field(
    _ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]
) -> list[str]:
    fields = [name.replace("-", "_") for name in value]
    for name in fields:
        if name not in tasks.CLEARED:
            raise click.BadParameter(
                f"{name!r} cannot be cleared; clearable: {', '.join(tasks.CLEARED)}."
            )
    return fields


# --- the group and its verbs -------------------------------------------------------------


task: click.Group = home_option(
    click.Group(
        "task",
        help="""The task ledger: everyone lists it; the manager adds, assigns, updates and closes.

    \b
    Workers finish a task with `hive task done ID --result ...`: that sends the
    manager a `done` message, and the manager records it in the ledger.

    \b
      hive task list --mine
      hive task add "Parse office.toml" --spec - --assignee jim < spec.md   (manager)
      hive task update t3 --status blocked --question "Can we drop Python 3.10?"
      hive task done t3 --result "Merged in src/config.py; tests in test_config.py"
    """,
    )
)


@task.command("list")
@click.option("--json", "as_json", is_flag=True, help='The ledger as JSON: {"tasks": [...]}.')
@click.option("--mine", is_flag=True, help="Only the tasks assigned to you.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(tasks.TASK_STATUSES),
    help="Only tasks in this status (repeat for several).",
)
@home_option
def list_tasks(as_json: bool, mine: bool, statuses: tuple[str, ...]) -> None:
    """List the tasks, in the ledger's order.

    \b
      hive task list
      hive task list --mine --status doing
      hive task list --json | jq '.tasks[] | select(.status != "done") | .id'
    """
    caller = _caller()
    with _ledger_errors():
        ledger = tasks.load_ledger(caller.paths.tasks)
    everything = tasks.tasks_of(ledger)
    chosen = [
        (raw, t)
        for raw, t in zip(ledger["tasks"], everything, strict=True)
        if (not mine or t.assignee == caller.who) and (not statuses or t.status in statuses)
    ]
    if as_json:
        # The raw objects, so fields this version does not know reach the reader too.
        shown = {"tasks": [tasks.normalized(raw) for raw, _ in chosen]}
        click.echo(msgspec.json.encode(shown).decode())
        return
    done = {t.id for t in everything if t.status == "done"}
    click.echo(_table([t for _, t in chosen], done, filtered=mine or bool(statuses)))


def _table(shown: list[Task], done: set[str], *, filtered: bool) -> str:
    if not shown:
        return "No tasks match." if filtered else "No tasks yet."
    id_w = max(len(t.id) for t in shown)
    who_w = max(len(t.assignee or "-") for t in shown)
    lines = []
    for t in shown:
        notes = []
        waiting = [d for d in t.depends_on if d not in done]
        if waiting:
            notes.append(f"waits for {', '.join(waiting)}")
        open_questions = sum(1 for q in t.questions if q.answer is None)
        if open_questions:
            notes.append(f"{open_questions} question(s) for the person")
        suffix = f"  [{'; '.join(notes)}]" if notes else ""
        lines.append(
            f"  {clean(t.id):<{id_w}}  {t.status:<7}  p{t.priority:<2}  "
            f"{clean(t.assignee or '-'):<{who_w}}  {preview(t.title, TITLE_WIDTH)}{clean(suffix)}"
        )
    noun = "task" if len(shown) == 1 else "tasks"
    return "\n".join([f"{len(shown)} {noun}:", *lines, "The full record: `hive task list --json`."])


@task.command()
@click.argument("title")
@click.option(
    "--spec", metavar="TEXT|-", default="", help="What to do, self-contained; - reads stdin."
)
@click.option("--assignee", metavar="ID", help="Give it to this agent (who gets the spec by mail).")
@click.option(
    "--priority",
    type=int,
    default=tasks.DEFAULT_PRIORITY,
    show_default=True,
    metavar="N",
    help=f"0 is the most urgent, {tasks.PRIORITY_MAX} the least.",
)
@click.option("--depends-on", "depends_on", multiple=True, metavar="ID", help="Repeat for several.")
@click.option("--id", "task_id", metavar="ID", help="Choose the id (default: the next t<N>).")
@home_option
def add(
    title: str,
    spec: str,
    assignee: str | None,
    priority: int,
    depends_on: tuple[str, ...],
    task_id: str | None,
) -> None:
    """Add a task (the manager). Prints its id.

    \b
      hive task add "Parse office.toml" --spec "Load it with tomllib; errors name the line."
      hive task add "Ship 0.2" --depends-on t1 --depends-on t2 --priority 1
      hive task add "Fix the flaky router test" --assignee jim --spec - < notes.md
    """
    caller = _writer()
    spec_text = text_or_stdin(spec)
    paths = caller.paths
    with tasks.locked(paths), _ledger_errors():
        ledger, added = tasks.add_task(
            tasks.load_ledger(paths.tasks),
            title,
            assignable=tasks.assignable(caller.config),
            now=utc_now_iso(),
            task_id=task_id,
            spec=spec_text,
            assignee=assignee,
            priority=priority,
            depends_on=depends_on,
        )
        request = _assignment(caller, added)
        tasks.save_ledger(paths.tasks, ledger)
    owner = f" (assigned to {added.assignee})" if added.assignee else ""
    click.echo(f"added {added.id}: {preview(added.title)}{owner}")
    if request is not None:
        post(caller, request)


@task.command()
@click.argument("task_id", metavar="ID")
@click.argument("agent_id", metavar="AGENT")
@home_option
def assign(task_id: str, agent_id: str) -> None:
    """Give task ID to AGENT (the manager); AGENT gets the spec as a request.

    \b
      hive task assign t3 pam
    """
    caller = _writer()
    paths = caller.paths
    with tasks.locked(paths), _ledger_errors():
        before = tasks.load_ledger(paths.tasks)
        ledger, assigned = tasks.assign_task(
            before, task_id, agent_id, assignable=tasks.assignable(caller.config), now=utc_now_iso()
        )
        if tasks.find_task(before, task_id).assignee == agent_id:
            click.echo(f"{task_id} is already assigned to {agent_id}; nothing changed.")
            return
        request = _assignment(caller, assigned)
        tasks.save_ledger(paths.tasks, ledger)
    click.echo(f"{task_id} assigned to {agent_id}")
    if request is not None:
        post(caller, request)


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--title", help="A new title (one line).")
@click.option("--spec", metavar="TEXT|-", help="A new spec; - reads stdin.")
@click.option("--status", type=click.Choice(tasks.TASK_STATUSES))
@click.option("--priority", type=int, metavar="N", help=f"0 (most urgent) to {tasks.PRIORITY_MAX}.")
@click.option(
    "--depends-on",
    "depends_on",
    multiple=True,
    metavar="ID",
    help="Replaces the dependencies; repeat for several.",
)
@click.option(
    "--clear",
    "cleared",
    multiple=True,
    metavar="FIELD",
    callback=_normalise_field,
    help=f"Reset a field to its default: {', '.join(tasks.CLEARED)}.",
)
@click.option("--question", metavar="TEXT", help="Record a question for the person on the task.")
@home_option
def update(
    task_id: str,
    title: str | None,
    spec: str | None,
    status: str | None,
    priority: int | None,
    depends_on: tuple[str, ...],
    cleared: list[str],
    question: str | None,
) -> None:
    """Change fields of task ID (the manager); fields not named stay as they are.

    \b
      hive task update t3 --status doing --priority 1
      hive task update t3 --depends-on t1 --depends-on t2
      hive task update t3 --clear assignee --clear depends_on
      hive task update t3 --status blocked --question "May we drop Python 3.10?"
    """
    caller = _writer()
    given: dict[str, object] = {
        name: value
        for name, value in (
            ("title", title),
            ("spec", None if spec is None else text_or_stdin(spec)),
            ("status", status),
            ("priority", priority),
            ("depends_on", list(depends_on) if depends_on else None),
        )
        if value is not None
    }
    both = sorted(set(given) & set(cleared))
    if both:
        raise BadUsage(f"{', '.join(both)}: give a new value or --clear it, not both.")
    if not given and not cleared and question is None:
        raise BadUsage(
            "nothing to change: give --title, --spec, --status, --priority, --depends-on, "
            "--clear or --question."
        )
    changes: dict[str, object] = {**given, **dict.fromkeys(cleared)}
    paths = caller.paths
    with tasks.locked(paths), _ledger_errors():
        ledger = tasks.load_ledger(paths.tasks)
        now = utc_now_iso()
        if changes:
            ledger, _ = tasks.update_task(
                ledger, task_id, changes, assignable=tasks.assignable(caller.config), now=now
            )
        if question is not None:
            ledger, _ = tasks.ask_question(ledger, task_id, question, asked_by=caller.who, now=now)
        tasks.save_ledger(paths.tasks, ledger)
    what = [*changes] + (["a question for the person"] if question is not None else [])
    click.echo(f"updated {task_id}: {', '.join(what)}")


@task.command("done")
@click.argument("task_id", metavar="ID")
@click.option(
    "--result", required=True, metavar="TEXT|-", help="What was done and where; - reads stdin."
)
@home_option
def done_task(task_id: str, result: str) -> None:
    """Report task ID done. From a worker this mails the manager, who updates the
    ledger; the manager (or the person) records it in the ledger directly.

    \b
      hive task done t3 --result "Parser in src/config.py, tests in tests/test_config.py"
      hive task done t3 --result - < summary.md
    """
    caller = _caller()
    text = text_or_stdin(result)
    if not text.strip():
        raise BadUsage('the result is empty: say what was done and where, --result "...".')
    paths = caller.paths
    if _writes(caller):
        require_proof(caller)
        with tasks.locked(paths), _ledger_errors():
            ledger, _ = tasks.complete_task(
                tasks.load_ledger(paths.tasks), task_id, text, now=utc_now_iso()
            )
            tasks.save_ledger(paths.tasks, ledger)
        click.echo(f"{task_id} done")
        return
    with _ledger_errors():
        finished = tasks.find_task(tasks.load_ledger(paths.tasks), task_id)
    report = Draft(
        to="god",
        act="done",
        subject=tasks.subject_line("done: ", finished.title),
        body=text,
        task=finished.id,
    )
    post(caller, report)
    click.echo(f"The manager ({caller.manager}) records {task_id} as done in the ledger.")


@task.command()
@click.argument("task_id", metavar="ID")
@click.argument("text", metavar="TEXT|-")
@home_option
def checkpoint(task_id: str, text: str) -> None:
    """Record where task ID got to (its assignee, or the manager): what is done, what is
    next. A retry starts from the last checkpoint.

    \b
      hive task checkpoint t3 "Parser done and tested; next: error messages with lines"
    """
    caller = require_proof(_caller(proof=True))
    body = text_or_stdin(text)
    paths = caller.paths
    with tasks.locked(paths), _ledger_errors():
        ledger = tasks.load_ledger(paths.tasks)
        held_by = tasks.find_task(ledger, task_id).assignee
        # The one ledger write a worker makes: its own task's checkpoint.
        if not _writes(caller) and caller.who != held_by:
            raise HiveError(
                f"{task_id} is {f'assigned to {held_by}' if held_by else 'not assigned'}: only "
                f"its assignee or the manager ({caller.manager}) records its checkpoint."
            )
        ledger, _ = tasks.record_checkpoint(ledger, task_id, body, by=caller.who, now=utc_now_iso())
        tasks.save_ledger(paths.tasks, ledger)
    click.echo(f"checkpoint recorded on {task_id}")


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--to", "to", metavar="AGENT", help="Give it to AGENT (default: its assignee).")
@home_option
def retry(task_id: str, to: str | None) -> None:
    """Try task ID again (the manager): one more attempt, given to its assignee or
    AGENT, who gets the spec and the last checkpoint as a request.

    \b
      hive task retry t3
      hive task retry t3 --to pam
    """
    caller = _writer()
    with _ledger_errors():
        retried, request = tasks.retry_as(caller.paths, caller.config, caller.who, task_id, to)
    click.echo(tasks.retried_line(retried, request))
    if request is not None:
        post(caller, request)
