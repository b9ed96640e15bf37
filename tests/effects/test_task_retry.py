"""Task checkpoints and retries: the assignee (or the manager) records where a task got
to; the manager retries it, one more attempt, and the assignee's request carries the
checkpoint. Refusals both ways, against the office's real answer to who is calling."""

from __future__ import annotations

import msgspec
import pytest
from click.testing import CliRunner, Result

from hive_core import mail
from hive_core.cli.group import cli
from hive_core.paths import HivePaths
from hive_core.schema import BODY_MAX, Draft, Ledger, Task
from hive_core.team import tasks

NOW = "2026-12-01T08:00:00.000Z"


@pytest.fixture(autouse=True)
def _answering(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("proving")


def hive(
    paths: HivePaths, *args: str, agent: str | None = None, stdin: str | None = None
) -> Result:
    env = {"HIVE_HOME": str(paths.home), "HIVE_AGENT_ID": agent, "HIVE_SECRET": None}
    return CliRunner(env=env).invoke(cli, ["task", *args], input=stdin)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def drafts(paths: HivePaths, who: str) -> list[Draft]:
    files = mail.message_files(paths.mailbox(who).outbox)
    return [msgspec.json.decode(f.read_bytes(), type=Draft) for f in files]


def task_on_disk(paths: HivePaths, task_id: str) -> Task:
    ledger = msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)
    return next(t for t in ledger.tasks if t.id == task_id)


def test_checkpoint_then_retry_carries_the_checkpoint(office_home: HivePaths) -> None:
    paths = office_home
    ok(hive(paths, "add", "Parse office.toml", "--spec", "Use tomllib.", "--assignee", "jim",
            agent="michael"))  # fmt: skip
    assert task_on_disk(paths, "t1").attempts == 1

    # Only its assignee or the manager records a checkpoint.
    refused = hive(paths, "checkpoint", "t1", "pam was here", agent="pam")
    assert refused.exit_code == 1
    assert "only its assignee or the manager (michael)" in refused.output
    assert task_on_disk(paths, "t1").checkpoint is None
    ok(hive(paths, "checkpoint", "t1", "Parser done; next: line numbers", agent="jim"))
    task = task_on_disk(paths, "t1")
    assert (task.checkpoint, task.checkpoint_by) == ("Parser done; next: line numbers", "jim")

    # Only the manager retries.
    refused = hive(paths, "retry", "t1", "--to", "pam", agent="jim")
    assert refused.exit_code == 1 and "only the manager (michael)" in refused.output
    assert task_on_disk(paths, "t1").attempts == 1
    before = len(drafts(paths, "michael"))

    out = ok(hive(paths, "retry", "t1", "--to", "pam", agent="michael"))
    assert "t1 is attempt 2, assigned to pam" in out.stdout
    task = task_on_disk(paths, "t1")
    assert (task.attempts, task.assignee, task.status) == (2, "pam", "doing")
    request = drafts(paths, "michael")[before:]
    assert len(request) == 1
    (draft,) = request
    assert (draft.to, draft.act, draft.task) == ("pam", "request", "t1")
    assert draft.subject == "task t1, attempt 2: Parse office.toml"
    assert "Parser done; next: line numbers" in draft.body and "Use tomllib." in draft.body
    assert draft.body.index("Parser done") < draft.body.index("Use tomllib.")

    # pam holds it now: she may checkpoint, jim no longer may; the manager always may.
    assert hive(paths, "checkpoint", "t1", "late", agent="jim").exit_code == 1
    ok(hive(paths, "checkpoint", "t1", "Line numbers half done", agent="pam"))
    ok(hive(paths, "checkpoint", "t1", "Noted by the manager", agent="michael"))
    # Retried again without --to: the same assignee, a third attempt.
    ok(hive(paths, "retry", "t1", agent="michael"))
    task = task_on_disk(paths, "t1")
    assert (task.attempts, task.assignee) == (3, "pam")
    last = drafts(paths, "michael")[-1]
    assert last.subject.startswith("task t1, attempt 3") and "Noted by the manager" in last.body


def test_retry_needs_someone_to_give_it_to(office_home: HivePaths) -> None:
    ok(hive(office_home, "add", "Orphan", agent="michael"))
    refused = hive(office_home, "retry", "t1", agent="michael")
    assert refused.exit_code == 1 and "--to AGENT" in refused.output
    assert task_on_disk(office_home, "t1").attempts == 1
    ok(hive(office_home, "retry", "t1", "--to", "jim", agent="michael"))
    (draft,) = drafts(office_home, "michael")
    assert "No checkpoint was recorded" in draft.body


def test_a_retry_message_fits_however_long_spec_and_checkpoint_are(
    office_home: HivePaths,
) -> None:
    paths = office_home
    ok(hive(paths, "add", "Big", "--spec", "-", "--assignee", "jim", agent="michael",
            stdin="s" * (BODY_MAX - 100)))  # fmt: skip
    ok(hive(paths, "checkpoint", "t1", "-", agent="jim", stdin="c" * 1000))
    ok(hive(paths, "retry", "t1", agent="michael"))
    draft = drafts(paths, "michael")[-1]
    assert len(draft.body.encode()) <= BODY_MAX
    assert "c" * 1000 in draft.body and draft.body.endswith("has all of it)")
    with pytest.raises(tasks.InvalidValue):
        tasks.record_checkpoint(tasks.load_ledger(paths.tasks), "t1", "  ", by="jim", now=NOW)
