"""The worktree verbs: `hive-office diff|merge|worktree remove` for the person, and
`hive merge` for the manager. The git work, and the merge's course both these and the
app's Diff screen follow (run_merge), are hive_core/worktrees/."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

import click

from hive_core import mail
from hive_core.caller import CallerError, require_person
from hive_core.cli.common import HOME_HELP, HiveError, click_home, home_option, open_caller
from hive_core.config import ConfigError, load_office
from hive_core.paths import HivePaths, resolve_home
from hive_core.schema import HUMAN, Draft, OfficeConfig
from hive_core.text import shown
from hive_core.worktrees import (
    WorktreeError,
    changed_files,
    patch,
    plan_merge,
    record_for,
    remove,
    render_stat,
    run_merge,
    runner,
)

MERGE_HELP = """Merge AGENT's branch into the branch its worktree was made from.

Only commits are merged: uncommitted work in the agent's worktree is named and left
there. What will change is shown first and you are asked (--yes skips the question).
A merge that would conflict changes nothing: the conflicting files are listed and
mailed to the manager. A remote desk's branch is merged on its host, over ssh."""


def _fail(message: str) -> NoReturn:
    click.echo(f"hive-office: {message.rstrip('.')}.", err=True)
    sys.exit(1)


def _office(home: str | None, person_only: str | None = None) -> tuple[HivePaths, OfficeConfig]:
    """The office of `home`; `person_only`: the verb, which only the person may run
    (caller.require_person)."""
    paths = HivePaths(resolve_home(home))
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        _fail(str(e))
    if person_only is not None:
        try:
            require_person(paths, person_only)
        except CallerError as e:
            _fail(str(e))
    return paths, config


def _mail_manager(paths: HivePaths, config: OfficeConfig) -> Callable[[str, str], None]:
    def tell(subject: str, body: str) -> None:
        draft = Draft(to=config.office.manager, subject=subject, body=body)
        try:
            mail.send(paths, config, HUMAN, draft)
        except (mail.DraftRefused, OSError) as e:
            click.echo(f"(the manager could not be told: {e})", err=True)
        else:
            click.echo(f"{config.office.manager} was told.")

    return tell


@click.command("diff")
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option("--stat", is_flag=True, help="Files with +/- line counts only.")
@click.argument("agent")
@click.pass_context
def diff_command(ctx: click.Context, home: str | None, stat: bool, agent: str) -> None:
    """AGENT's changes against its base: committed, uncommitted and untracked (as new).
    A remote desk's worktree is read on its host, over ssh."""
    paths, _config = _office(home or ctx.obj["home"])
    try:
        record = record_for(paths, agent)
        # A remote desk's worktree is read on its host, through its desk's connection.
        run = runner(paths, record)
        text = render_stat(changed_files(record, run=run)) if stat else patch(record, run=run)
        # The agent's code, on a terminal, is shown and not obeyed (a bidi override in a
        # line under review, an escape sequence); piped (to `git apply`) it stays exact
        # (color=True: click would strip what looks like styles).
        tty = sys.stdout.isatty()
        click.echo(shown(text) if tty else text, nl=stat, color=not tty)
    except WorktreeError as e:
        _fail(str(e))


@click.command("merge", help=MERGE_HELP)
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option("--yes", is_flag=True, help="Do not ask (for scripts).")
@click.argument("agent")
@click.pass_context
def merge_command(ctx: click.Context, home: str | None, yes: bool, agent: str) -> None:
    paths, config = _office(home or ctx.obj["home"], person_only="merge")
    try:
        code = run_merge(
            plan_merge(paths, agent),
            ask=lambda q: yes or click.confirm(q, default=False),
            echo=click.echo,
            tell_manager=_mail_manager(paths, config),
        )
    except WorktreeError as e:
        _fail(str(e))
    ctx.exit(code)


@click.group("worktree")
def worktree_group() -> None:
    """The agents' git worktrees."""


@worktree_group.command("remove")
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.argument("agent")
@click.pass_context
def remove_command(ctx: click.Context, home: str | None, agent: str) -> None:
    """Remove AGENT's worktree folder (its branch stays). Refused while it holds
    uncommitted work."""
    root = ctx.find_root().obj or {}
    paths, _config = _office(home or root.get("home"), person_only="worktree remove")
    try:
        click.echo(remove(paths, agent))
    except WorktreeError as e:
        _fail(str(e))


OFFICE_COMMANDS = (diff_command, merge_command, worktree_group)


@click.command("merge")
@home_option
@click.option("--dry-run", is_flag=True, help="Show what would be merged; change nothing.")
@click.argument("agent")
def hive_merge(agent: str, dry_run: bool) -> None:
    """(manager only) Merge AGENT's branch into its base, if it merges cleanly.

    Only commits are merged: uncommitted work in the agent's worktree is named and left
    there. On a conflict nothing changes and the files are listed."""
    caller = open_caller(click_home(), proof=True)
    if caller.who not in (caller.manager, HUMAN):
        raise HiveError(
            f"only the manager ({caller.manager}) merges branches; ask it: "
            f"`hive send --to {caller.manager} --act request --subject 'merge {agent}' ...`."
        )
    try:
        code = run_merge(
            plan_merge(caller.paths, agent),
            ask=lambda _q: True,
            echo=click.echo,
            tell_manager=None
            if caller.who == caller.manager
            else _mail_manager(caller.paths, caller.config),
            dry_run=dry_run,
        )
    except WorktreeError as e:
        raise HiveError(f"{str(e).rstrip('.')}.") from None
    click.get_current_context().exit(code)
