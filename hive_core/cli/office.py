"""`hive-office`: create, serve and (soon) open an office."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from typing import NoReturn

import click

from hive_core import control
from hive_core.agents.supervisor import tool_path
from hive_core.config import ConfigError, load_office
from hive_core.hive import init_office, tighten_modes
from hive_core.office import Office, OfficeBusy, office_lock
from hive_core.paths import HivePaths, resolve_home
from hive_core.schema import ControlCommand, ControlReply, ControlRequest

HOME_HELP = "Office home (default: $HIVE_HOME, else ~/.hive-office)."


def _paths(home: str | None) -> HivePaths:
    return HivePaths(resolve_home(home))


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"hive-office: {message}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def _repo_refusals(paths: HivePaths) -> Iterator[None]:
    """A hive repository the office must not commit on stops the command with a
    sentence, not a traceback."""
    from pygit2 import GitError

    from hive_core.committer import RepoDamaged

    try:
        yield
    except RepoDamaged as e:
        _fail(str(e))
    except GitError as e:
        _fail(
            f"the hive at {paths.hive} is not a git repository the office can use ({e}). "
            "Move its .git aside and run `hive-office init` to start a new history; the "
            "hive's files are kept."
        )


@click.group(invoke_without_command=True)
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
            _open(_paths(home))


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _fail(
            "the office on screen needs a terminal; run it in one (tmux and SSH are fine), "
            "or use `hive-office serve` for the office without a screen.",
            code=2,
        )


def _demo(home: str | None) -> None:
    """A demo office in its own home (never yours), laid out afresh each run."""
    from hive_core.demo.office import DemoHomeTaken, apply_env, demo_home, start_demo
    from hive_tui.app import HiveApp

    _need_terminal()
    paths = HivePaths(demo_home(home))
    claude = shutil.which(
        "claude", path=os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
    )
    if claude is None:
        _fail(
            "the demo runs real Claude Code agents and `claude` is not installed. Run "
            "./scripts/setup (it installs a pinned one) or `npm install -g @anthropic-ai/claude-code`."
        )
    try:
        with office_lock(paths):
            demo = start_demo(paths.home)
            apply_env(demo)
            try:
                HiveApp(Office(paths, load_office(paths.office_toml)), demo=True).run()
            finally:
                demo.stop()
    except (OfficeBusy, DemoHomeTaken) as e:
        _fail(str(e))


def _open(paths: HivePaths) -> None:
    _need_terminal()
    if not paths.office_toml.exists() or not paths.hive.is_dir():
        try:
            created = init_office(paths)
        except ConfigError as e:
            _fail(str(e))
        from hive_core.committer import commit_all

        with _repo_refusals(paths):
            commit_all(paths.hive, "office: initialised")
        tighten_modes(paths)  # libgit2 writes its objects group/other-readable
        click.echo(f"hive-office: created a default office in {paths.home} ({len(created)} items).")
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        _fail(str(e))
    from hive_tui.app import HiveApp

    try:
        with office_lock(paths), _repo_refusals(paths):
            HiveApp(Office(paths, config)).run()
    except OfficeBusy as e:
        _fail(str(e))


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def init(ctx: click.Context, home: str | None) -> None:
    """Create the office home, its hive (a git repo) and a default office.toml.

    Safe to re-run: it only adds what is missing and never overwrites a file.
    """
    paths = _paths(home or ctx.obj["home"])
    try:
        created = init_office(paths)
    except ConfigError as e:
        _fail(str(e))
    from hive_core.committer import commit_all

    with _repo_refusals(paths):
        commit_all(paths.hive, "office: initialised" if created else "office: init re-run")
    tighten_modes(paths)  # libgit2 writes its objects group/other-readable
    if created:
        click.echo(f"Created the office in {paths.home}:")
        for item in created:
            click.echo(f"  {item}")
    else:
        click.echo(f"The office in {paths.home} is complete; nothing to create.")
    click.echo(f"Edit {paths.office_toml} to change the team, then run `hive-office serve`.")


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option("--no-agents", is_flag=True, help="Route and commit only; start no agent CLIs.")
@click.pass_context
def serve(ctx: click.Context, home: str | None, no_agents: bool) -> None:
    """Run the office without a screen until SIGTERM or Ctrl+C.

    Routes mail between agents, commits the hive to git, and (unless --no-agents)
    starts the roster's agents. On SIGTERM/SIGINT it finishes routing, makes a last
    commit and exits 0. Only one office runs per home.
    """
    # A stop asked for while starting up is remembered, not fatal: the office starts,
    # recovers, routes what is waiting, commits, and exits 0 like any other stop.
    early: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: early.append(signum))
    paths = _paths(home or ctx.obj["home"])
    if not paths.hive.is_dir():
        _fail(f"there is no office in {paths.home}. Run `hive-office init` first.")
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        _fail(str(e))
    try:
        with office_lock(paths), _repo_refusals(paths):
            office = Office(paths, config, agents=not no_agents)
            click.echo(f"hive-office: serving {paths.home} (pid {os.getpid()}); Ctrl+C to stop.")
            asyncio.run(_serve(office, early))
    except OfficeBusy as e:
        _fail(str(e))
    click.echo("hive-office: stopped.")


async def _serve(office: Office, early: list[int]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if early:
        stop.set()
    await office.run(stop)


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def doctor(ctx: click.Context, home: str | None) -> None:
    """Check the office, git, sockets and each agent's CLI; say what to fix."""
    from hive_core.doctor import run_checks

    checks = run_checks(_paths(home or ctx.obj["home"]))
    for check in checks:
        click.echo(f"{'ok ' if check.ok else 'FIX'}  {check.what}")
        if check.fix:
            click.echo(f"     -> {check.fix}")
    if not all(c.ok for c in checks):
        sys.exit(1)


def _control(home: str | None, req: ControlRequest) -> ControlReply:
    paths = _paths(home)
    try:
        reply = control.request(paths.control_socket, req)
    except ConnectionError:
        _fail(f"no office is running on {paths.home}; start one with `hive-office serve`.")
    if not reply.ok:
        _fail(reply.error or "the office refused.")
    return reply


@cli.command("type")
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option("--no-enter", is_flag=True, help="Type the text but do not press Enter.")
@click.argument("agent")
@click.argument("text")
@click.pass_context
def type_(ctx: click.Context, home: str | None, no_enter: bool, agent: str, text: str) -> None:
    """Type TEXT into AGENT's terminal, as you would in its pane (like tmux send-keys).

    \b
    Example:
      hive-office type michael "Plan the release and split it into tasks."
    """
    _control(
        home or ctx.obj["home"],
        ControlRequest(cmd="type", agent=agent, text=text, enter=not no_enter),
    )


# The person's one-agent actions on a running office: (command, help, what to say after).
AGENT_ACTIONS: list[tuple[ControlCommand, str, str]] = [
    (
        "pause",
        "Pause AGENT: its next tool call is refused and it is not kept working for mail.",
        "{agent} is paused; `hive-office resume {agent}` lets it go on.",
    ),
    ("resume", "Resume a paused or halted AGENT.", "{agent} is resumed."),
    (
        "halt",
        "Halt AGENT: it stops at its next hook (`resume` lets it go on).",
        "{agent} will stop at its next hook.",
    ),
    (
        "archive",
        "Archive AGENT: its CLI stops and mail to it goes to the manager (`spawn` brings it back).",
        "{agent} is archived.",
    ),
    (
        "spawn",
        "Start AGENT if it is not running (an archived agent comes back to the floor).",
        "{agent} is starting.",
    ),
]


def _agent_action(command: ControlCommand, help_text: str, done: str) -> click.Command:
    @click.pass_context
    def action(ctx: click.Context, home: str | None, agent: str) -> None:
        _control(home or ctx.obj["home"], ControlRequest(cmd=command, agent=agent))
        click.echo(done.format(agent=agent))

    action.__doc__ = help_text
    decorated = click.option("--home", metavar="DIR", help=HOME_HELP)(
        click.argument("agent")(action)
    )
    return click.command(command)(decorated)


for _command, _help, _done in AGENT_ACTIONS:
    cli.add_command(_agent_action(_command, _help, _done))


def main() -> None:
    cli(prog_name="hive-office")


if __name__ == "__main__":
    main()
