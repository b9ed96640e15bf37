"""`hive-office`: the core's commands (hive_core/cli/office.py), plus opening the office
on screen when no command is given, and --demo. The only place the command line meets
the app, so the core runs without Textual."""

from __future__ import annotations

import gc
import importlib
import os
import shutil
import sys
import threading
from typing import NoReturn

import click

from hive_core.cli.common import HOME_HELP
from hive_core.config import ConfigError, load_office
from hive_core.office import daemon
from hive_core.paths import HivePaths, resolve_home

# Before the office starts, only what starting it takes is imported: the core's command
# line and the office's own modules (about 150 ms) would hold its process back by as
# long. They load while it starts, with the app, or when a command needs them.


def _core() -> click.Group:
    from hive_core.cli.office import cli as core

    return core


def fail(message: str, code: int = 1) -> NoReturn:
    """The core's `fail`, its module imported only when something goes wrong."""
    from hive_core.cli.office import fail as said

    said(message, code)


class _Commands(click.Group):
    """The core group's commands (loaded when one is run or listed) and the app's own
    (attach)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_core().commands, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name) or _core().commands.get(cmd_name)


@click.group(cls=_Commands, invoke_without_command=True)
@click.version_option(package_name="hive-office", prog_name="hive-office")
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option("--demo", is_flag=True, help="Open a demo office with scripted agents (no API key).")
@click.pass_context
def cli(ctx: click.Context, home: str | None, demo: bool) -> None:
    """A terminal office for a team of coding agents.

    With no command it shows the office on screen: it attaches to the office running
    for the home, or starts one in the background first (creating a default office if
    there is none). The office and its agents go on when the screen goes.

    \b
    Start here:
      hive-office                 open the office (ctrl+] ? inside shows the keys)
      hive-office attach          come back to it after ctrl+] d (which leaves it running)
      hive-office stop            stop the office (agents, last routing, last commit)
      hive-office ls              the offices running for you on this machine
      hive-office init            create ~/.hive-office with a default team
      hive-office serve           run the office in the foreground, without a screen
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
    from hive_core.agents.claude import ClaudeProvider
    from hive_core.agents.provider import tool_path
    from hive_core.cli import hive
    from hive_core.demo.office import DemoHomeTaken, apply_env, claim_demo_home, start_demo
    from hive_core.office import Office, OfficeBusy, office_lock
    from hive_core.paths import demo_home
    from hive_tui.app import HiveApp

    _need_terminal()
    paths = HivePaths(demo_home(home))
    claude = shutil.which(
        "claude", path=os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
    )
    if claude is None:
        fail(
            "the demo runs real Claude Code agents and `claude` is not installed. "
            + ClaudeProvider().install_hint()
        )
    try:
        claim_demo_home(paths.home)  # before the lock, which writes into the home
        with office_lock(paths):
            demo = start_demo(paths.home)
            apply_env(demo)
            try:
                HiveApp(
                    Office(paths, load_office(paths.office_toml), program=hive), demo=True
                ).run()
            finally:
                demo.stop()
    except (OfficeBusy, DemoHomeTaken) as e:
        fail(str(e))


def _open(paths: HivePaths) -> None:
    """Attach to the office of `paths`, starting it detached first if none runs."""
    _need_terminal()
    if daemon.running_pid(paths) is None:
        if not paths.office_toml.exists() or not paths.hive.is_dir():
            from hive_core.cli.office import create_office

            created = create_office(paths)
            click.echo(
                f"hive-office: created a default office in {paths.home} ({len(created)} items)."
            )
        try:
            load_office(paths.office_toml)  # a bad office.toml is said here, not in a log
        except ConfigError as e:
            fail(str(e))
        # The client's imports, the app's and Textual's (most of a first frame's time
        # with 50 agents), overlap the office's start.
        loading = threading.Thread(target=_load_app)
        try:
            started = daemon.start(paths, meanwhile=loading.start)
        except daemon.StartFailed as e:
            fail(str(e))
        loading.join()  # before the import below, which would otherwise wait on its lock
        click.echo(f"hive-office: {started.sentence(paths)}")
        # It has just answered: asking again would wait on its loop, busiest now.
        _attach(paths, answered=True)
    _attach(paths)


def _load_app() -> None:
    """The app's modules, Textual's and the office's. What they make lives as long as
    the process: the cyclic collector is off while they load and it is frozen out of it
    after, rather than walked again every few hundred objects made (half the
    collections before a first frame, and its one full collection)."""
    gc.disable()
    try:
        importlib.import_module("hive_tui.app")
    finally:
        gc.freeze()
        gc.enable()


def _attach(paths: HivePaths, *, answered: bool = False) -> NoReturn:
    if not answered:
        try:
            daemon.ready(paths)  # one that is still starting is waited for
        except (daemon.NotRunning, daemon.StartFailed) as e:
            fail(str(e))
    # Textual loads in the client, not for the commands that never open the screen.
    from hive_tui.client import run_client

    sys.exit(run_client(paths))


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def attach(ctx: click.Context, home: str | None) -> None:
    """Show the running office on this terminal (`ctrl+] d` detaches; the office and
    its agents go on)."""
    paths = HivePaths(resolve_home(home or ctx.obj["home"]))
    if daemon.running_pid(paths) is None:
        fail(str(daemon.NotRunning(paths)))
    _need_terminal()
    _attach(paths)


def main() -> None:
    cli(prog_name="hive-office")


if __name__ == "__main__":
    main()
