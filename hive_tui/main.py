"""`hive-office`: the core's commands (hive_core/cli/office.py), plus opening the office
on screen when no command is given, and --demo. The only place the command line meets
the app, so the core runs without Textual."""

from __future__ import annotations

import os
import shutil
import sys

import click

from hive_core.agents.supervisor import tool_path
from hive_core.cli.office import HOME_HELP, create_office, fail, repo_refusals
from hive_core.cli.office import cli as core
from hive_core.config import ConfigError, load_office
from hive_core.office import Office, OfficeBusy, office_lock
from hive_core.paths import HivePaths, resolve_home


@click.group(invoke_without_command=True, commands=core.commands)
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option("--demo", is_flag=True, help="Open a demo office with scripted agents (no API key).")
@click.pass_context
def cli(ctx: click.Context, home: str | None, demo: bool) -> None:
    """A terminal office for a team of coding agents.

    With no command it opens the office on screen (creating a default one in the home
    first if there is none).

    \b
    Start here:
      hive-office                 open the office (ctrl+] ? inside shows the keys)
      hive-office init            create ~/.hive-office with a default team
      hive-office serve           run the office headless (agents, router, committer)
      hive send --to jim ...      talk to the team (see `hive --help`)
    """
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    if ctx.invoked_subcommand is None:
        if demo:
            _demo(home)
        else:
            _open(HivePaths(resolve_home(home)))


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail(
            "the office on screen needs a terminal; run it in one (tmux and SSH are fine), "
            "or use `hive-office serve` for the office without a screen.",
            code=2,
        )


def _demo(home: str | None) -> None:
    """A demo office in its own home (never yours), laid out afresh each run."""
    from hive_core.demo.office import (
        DemoHomeTaken,
        apply_env,
        claim_demo_home,
        demo_home,
        start_demo,
    )
    from hive_tui.app import HiveApp

    _need_terminal()
    paths = HivePaths(demo_home(home))
    claude = shutil.which(
        "claude", path=os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
    )
    if claude is None:
        fail(
            "the demo runs real Claude Code agents and `claude` is not installed. Run "
            "./scripts/setup (it installs a pinned one) or `npm install -g @anthropic-ai/claude-code`."
        )
    try:
        claim_demo_home(paths.home)  # before the lock, which writes into the home
        with office_lock(paths):
            demo = start_demo(paths.home)
            apply_env(demo)
            try:
                HiveApp(Office(paths, load_office(paths.office_toml)), demo=True).run()
            finally:
                demo.stop()
    except (OfficeBusy, DemoHomeTaken) as e:
        fail(str(e))


def _open(paths: HivePaths) -> None:
    _need_terminal()
    if not paths.office_toml.exists() or not paths.hive.is_dir():
        created = create_office(paths)
        click.echo(f"hive-office: created a default office in {paths.home} ({len(created)} items).")
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        fail(str(e))
    # Textual loads here, not for the commands that never open the screen.
    from hive_tui.app import HiveApp

    try:
        with office_lock(paths), repo_refusals(paths):
            HiveApp(Office(paths, config)).run()
    except OfficeBusy as e:
        fail(str(e))


def main() -> None:
    cli(prog_name="hive-office")


if __name__ == "__main__":
    main()
