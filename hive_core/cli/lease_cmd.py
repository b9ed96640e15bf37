"""`hive lease` and `hive release`: file leases (hive_core/team/leases.py) from the command line.

Taking, renewing and releasing a lease changes what other agents may edit, so the caller
must be proven (the office runs). Listing needs nothing. A PATH is a file, a folder (its
contents) or an fnmatch pattern, taken against the current folder and stored relative to
its repository's top; quote a pattern so the shell leaves it alone. The office's hive
watcher sees leases.json change and the committer versions it like the board.
"""

from __future__ import annotations

import posixpath
import time

import click
import msgspec

from hive_core import invocation
from hive_core.caller import Caller
from hive_core.cli.common import (
    RELAYED_ENV,
    BadUsage,
    HiveError,
    click_home,
    home_option,
    open_caller,
    relayed,
)
from hive_core.render import clean
from hive_core.schema import HUMAN
from hive_core.team import leases, tasks
from hive_core.team.leases import Lease

# `hive lease list` and `hive lease break` are verbs; a file named so is `./list`.
_VERBS = ("list", "break")


def _places(raw: tuple[str, ...]) -> list[tuple[str, str]]:
    if not raw:
        raise BadUsage("name the files to lease: `hive lease PATH...` (a file, folder or 'glob').")
    if relayed():
        # A remote desk's files are on its host, named from its cwd there.
        host = _remote_host()
        cwd = invocation.getenv(RELAYED_ENV) or ""
        return [leases.on_host(host, posixpath.join(cwd, p)) for p in raw]
    finder = leases.Repositories()
    cwd = invocation.getcwd()
    return [finder.place(leases.resolve_pattern(p, cwd)) for p in raw]


def _remote_host() -> str:
    """The host of the desk this relayed verb runs for (office.toml's, read here)."""
    caller = open_caller(click_home())
    spec = next((a for a in caller.config.agents if a.id == caller.who), None)
    if spec is None or spec.host is None:
        raise HiveError(f"{caller.who} has no host in office.toml any more; try again.")
    return spec.host


def _done(caller: Caller) -> frozenset[str]:
    return leases.done_tasks(caller.paths)


def _current_task(caller: Caller) -> str | None:
    """The caller's task in progress, if it has exactly one: the lease ends with it."""
    try:
        ledger = tasks.load_ledger(caller.paths.tasks)
    except tasks.LedgerError:
        return None
    doing = [
        t.id for t in tasks.tasks_of(ledger) if t.assignee == caller.who and t.status == "doing"
    ]
    return doing[0] if len(doing) == 1 else None


def _load(caller: Caller) -> list[Lease]:
    try:
        return leases.load(caller.paths.leases)
    except leases.BadLeases as e:
        raise HiveError(str(e)) from None


def _until(lease: Lease) -> str:
    return lease.expires.replace("T", " ").removesuffix("Z") + " UTC"


@click.command("lease", context_settings={"max_content_width": 100})
@click.argument("words", nargs=-1, metavar="PATH... | list | break PATH...")
@click.option("--ttl", default=leases.TTL_DEFAULT, show_default=True, help="How long it holds.")
@click.option("--reason", default="", help="What you are doing, shown to whoever is refused.")
@click.option(
    "--task",
    "task_id",
    metavar="ID",
    help="Released when this task is done (default: your one task in progress).",
)
@click.option("--json", "as_json", is_flag=True, help="`list`: the live leases as JSON.")
@home_option
def lease_command(
    words: tuple[str, ...], ttl: str, reason: str, task_id: str | None, as_json: bool
) -> None:
    """Lease files so no other agent edits them: until --ttl passes, you release them,
    your task is done or you are archived. `list` shows the live leases; `break` (the
    manager and the person) releases anyone's.

    \b
      hive lease src/parser.py 'tests/test_parser*' --reason "new grammar"
      hive lease src/ --ttl 2h
      hive lease list [--json]
      hive lease break src/parser.py          (manager, person)
    """
    if words[:1] == ("list",):
        if len(words) > 1:
            raise BadUsage("`hive lease list` takes no paths.")
        _list(open_caller(click_home()), as_json)
        return
    if words[:1] == ("break",):
        _release(words[1:], force=True)
        return
    try:
        seconds = leases.parse_ttl(ttl)
    except ValueError as e:
        raise BadUsage(str(e)) from None
    if "\n" in reason or len(reason) > leases.REASON_MAX:
        raise BadUsage(f"--reason is one line of at most {leases.REASON_MAX} characters.")
    wanted = _places(words)
    caller = open_caller(click_home(), proof=True)
    task = task_id if task_id is not None else _current_task(caller)
    if task is not None and not tasks.TASK_ID_RE.match(task):
        raise BadUsage(f"--task {task!r} is not a task id; `hive task list` shows them.")
    now = time.time()
    with leases.locked(caller.paths):
        try:
            held = leases.take(
                _load(caller),
                wanted,
                caller.who,
                now=now,
                ttl=seconds,
                reason=reason,
                task=task,
                done=_done(caller),
            )
        except leases.LeaseRefused as e:
            raise HiveError(str(e)) from None
        leases.save(caller.paths.leases, held)
    until = leases.iso(now + seconds).replace("T", " ").removesuffix("Z") + " UTC"
    ends = f", or when {task} is done" if task else ""
    for repo, pattern in dict.fromkeys(wanted):
        click.echo(f"leased {clean(leases.shown(repo, pattern))} until {until}{ends}")


@click.command("release")
@click.argument("paths", nargs=-1)
@click.option("--force", is_flag=True, help="Whoever holds it (the manager and the person).")
@home_option
def release_command(paths: tuple[str, ...], force: bool) -> None:
    """Let go of leases, each PATH exactly as it was leased.

    \b
      hive release src/parser.py 'tests/test_parser*'
      hive release --force src/parser.py      (manager, person: same as `hive lease break`)
    """
    _release(paths, force=force)


def _release(paths: tuple[str, ...], *, force: bool) -> None:
    wanted = _places(paths)
    caller = open_caller(click_home(), proof=True)
    if force and caller.who not in (caller.manager, HUMAN):
        raise HiveError(
            f"only the manager ({caller.manager}) or the person breaks another's lease; ask "
            "the holder to release it, or the manager."
        )
    with leases.locked(caller.paths):
        try:
            left, gone = leases.release(
                _load(caller), wanted, caller.who, force=force, now=time.time(), done=_done(caller)
            )
        except leases.LeaseRefused as e:
            raise HiveError(str(e)) from None
        leases.save(caller.paths.leases, left)
    for lease in gone:
        whose = "" if lease.holder == caller.who else f" (held by {lease.holder})"
        click.echo(f"released {clean(leases.shown(lease.repo, lease.path))}{whose}")


def _list(caller: Caller, as_json: bool) -> None:
    held = leases.live(_load(caller), time.time(), _done(caller))
    if as_json:
        click.echo(msgspec.json.encode(leases.LeaseFile(held)).decode())
        return
    if not held:
        click.echo("No live leases.")
        return
    for lease in held:
        extra = [f"task {lease.task}"] if lease.task else []
        extra += [lease.reason] if lease.reason else []
        note = f"  ({'; '.join(extra)})" if extra else ""
        click.echo(
            clean(
                f"  {lease.holder}  {leases.shown(lease.repo, lease.path)}  until "
                f"{_until(lease)}{note}"
            )
        )
