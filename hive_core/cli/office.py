"""`hive-office` without a screen: create, serve and check an office, and the person's
actions on a running one (a verb for each of actions.ACTIONS).

This group never imports the app: hive_tui/main.py adds opening the office on screen
(and --demo) on top of it, and is what the `hive-office` command runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import click
import msgspec

from hive_core import control
from hive_core.actions import ACTIONS, BY_NAME, Escalation, PersonAction
from hive_core.caller import CallerError, require_person
from hive_core.cli import hive
from hive_core.cli.common import HOME_HELP
from hive_core.cli.cost_cmd import cost_command
from hive_core.cli.worktree_cmd import OFFICE_COMMANDS
from hive_core.config import ConfigError, load_office
from hive_core.hint import office_command
from hive_core.hive import init_office, tighten_modes
from hive_core.office import Office, OfficeBusy, daemon, office_lock
from hive_core.paths import HivePaths, resolve_home
from hive_core.render import preview, why_text
from hive_core.schema import PROVIDER_NAMES, ControlReply, ControlRequest


def _paths(home: str | None) -> HivePaths:
    return HivePaths(resolve_home(home))


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"hive-office: {message}", err=True)
    sys.exit(code)


def person_only(paths: HivePaths, verb: str) -> None:
    """Go on only if this process is the person (caller.require_person)."""
    try:
        require_person(paths, verb)
    except CallerError as e:
        fail(str(e))


@contextlib.contextmanager
def repo_refusals(paths: HivePaths) -> Iterator[None]:
    """A hive repository the office must not commit on stops the command with a
    sentence, not a traceback."""
    from pygit2 import GitError

    from hive_core.committer import RepoDamaged

    try:
        yield
    except RepoDamaged as e:
        fail(str(e))
    except GitError as e:
        fail(
            f"the hive at {paths.hive} is not a git repository the office can use ({e}). "
            f"Move its .git aside and run `{office_command(paths.home, 'init')}` to start a "
            "new history; the hive's files are kept."
        )


@click.group()
@click.version_option(package_name="hive-office", prog_name="hive-office")
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """The office without a screen: create, serve, check and act on it.

    `hive-office` (hive_tui) adds opening the office on screen to these commands.
    """
    ctx.ensure_object(dict)
    ctx.obj["home"] = home


def create_office(paths: HivePaths) -> list[str]:
    """Lay out what is missing of the office (never overwriting) and commit it; what
    was created. Refusals end the command with a sentence."""
    try:
        created = init_office(paths)
    except ConfigError as e:
        fail(str(e))
    from hive_core.committer import commit_all

    with repo_refusals(paths):
        commit_all(paths.hive, "office: initialised" if created else "office: init re-run")
    tighten_modes(paths)  # libgit2 writes its objects group/other-readable
    return created


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def init(ctx: click.Context, home: str | None) -> None:
    """Create the office home, its hive (a git repo) and a default office.toml.

    Safe to re-run: it only adds what is missing and never overwrites a file.
    """
    paths = _paths(home or ctx.obj["home"])
    created = create_office(paths)
    if created:
        click.echo(f"Created the office in {paths.home}:")
        for item in created:
            click.echo(f"  {item}")
    else:
        click.echo(f"The office in {paths.home} is complete; nothing to create.")
    click.echo(
        f"Edit {paths.office_toml} to change the team, then run `{office_command(paths.home)}`."
    )


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
        fail(
            f"there is no office in {paths.home}. Run `{office_command(paths.home, 'init')}` first."
        )
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        fail(str(e))
    try:
        with office_lock(paths), repo_refusals(paths):
            office = Office(paths, config, agents=not no_agents, program=hive)
            click.echo(f"hive-office: serving {paths.home} (pid {os.getpid()}); Ctrl+C to stop.")
            with daemon.listed(paths):
                asyncio.run(_serve(office, early))
    except OfficeBusy as e:
        fail(str(e))
    click.echo("hive-office: stopped.")


async def _serve(office: Office, early: list[int]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopping() -> None:
        stop.set()
        # However the stop goes, the process (and so the home's lock) ends by the deadline.
        daemon.exit_by()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)
    if early:
        stopping()
    try:
        await office.run(stop)
    finally:
        daemon.exit_by()  # an office that ended on its own: its threads may still hold it


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def stop(ctx: click.Context, home: str | None) -> None:
    """Stop the running office: its agents stop, waiting mail is routed, a last commit
    is made, and the office's process exits (this waits until it is gone)."""
    paths = _paths(home or ctx.obj["home"])
    person_only(paths, "stop")
    try:
        pid = daemon.stop(paths)
    except (daemon.NotRunning, daemon.StopTimeout) as e:
        fail(str(e))
    click.echo(
        f"hive-office: the office of {paths.home} (pid {pid}) stopped; its agents stopped with it."
    )


@cli.command("ls")
def list_offices() -> None:
    """The offices of this user on this machine: home, pid, agents running, clients attached."""
    click.echo(daemon.render(daemon.offices()))


@cli.command()
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def doctor(ctx: click.Context, home: str | None) -> None:
    """Check the office, git, sockets and each agent's CLI; say what to fix."""
    from hive_core.cli.doctor import run_checks

    checks = run_checks(_paths(home or ctx.obj["home"]))
    for check in checks:
        click.echo(f"{'ok ' if check.ok else 'FIX'}  {check.what}")
        if check.fix:
            click.echo(f"     -> {check.fix}")
    if not all(c.ok for c in checks):
        sys.exit(1)


@cli.command("remote-setup")
@click.argument("host")
@click.option(
    "--ssh-arg",
    "ssh_args",
    multiple=True,
    metavar="ARG",
    help="An ssh option word (repeat it); default: the ssh_args of office.toml's agent on HOST.",
)
@click.option(
    "--venv", metavar="PATH", help="The venv on HOST; default: office.toml's remote_venv."
)
@click.option("--python", default="python3", show_default=True, help="The Python on HOST.")
@click.option(
    "--pip-arg", "pip_args", multiple=True, metavar="ARG", help="A pip option (repeat it)."
)
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.pass_context
def remote_setup(
    ctx: click.Context,
    host: str,
    ssh_args: tuple[str, ...],
    venv: str | None,
    python: str,
    pip_args: tuple[str, ...],
    home: str | None,
) -> None:
    """Install this hive-office (hive, cth-hook) into a venv on HOST, over ssh, with pip.

    \b
      hive-office remote-setup build-box
      hive-office remote-setup gpu1 --ssh-arg=-p --ssh-arg=2222 --python python3.11
    """
    from hive_core.remote.setup import SetupError
    from hive_core.remote.setup import remote_setup as run_setup

    try:
        target, installed = run_setup(
            _paths(home or ctx.obj["home"]),
            host,
            ssh_args=ssh_args,
            venv=venv,
            python=python,
            pip_args=pip_args,
        )
    except SetupError as e:
        fail(str(e))
    click.echo(f"hive-office {installed} installed in {target.venv} on {host}")


def _control(
    home: str | None,
    req: ControlRequest,
    offline: Callable[[HivePaths, ControlRequest], ControlReply] | None = None,
) -> ControlReply:
    paths = _paths(home)
    try:
        reply = control.request(paths.control_socket, req)
    except ConnectionError:
        if offline is None:
            fail(
                f"no office is running on {paths.home}; `{office_command(paths.home)}` starts one."
            )
        reply = offline(paths, req)
    if not reply.ok:
        fail(reply.error or "the office refused.")
    return reply


# --- the person's actions: one verb each, from actions.ACTIONS ------------------------

_EPILOGS = {
    "type": """\b
Example:
  hive-office type michael "Plan the release and split it into tasks."
""",
}
# What a verb takes besides its target (the table says what it acts on, not how to type it).
_EXTRA: dict[str, list[click.Parameter]] = {
    "type": [
        click.Option(["--no-enter"], is_flag=True, help="Type the text but do not press Enter."),
        click.Argument(["text"]),
    ],
    "answer": [click.Argument(["text"])],
    "escalations": [click.Option(["--json", "as_json"], is_flag=True, help="Print JSON.")],
    "why": [click.Option(["--json", "as_json"], is_flag=True, help="Print JSON.")],
    "hire": [
        click.Argument(["agent"]),
        click.Option(["--name"], required=True, help="Its name, as the roster and map show it."),
        click.Option(["--role"], default="", help="One line: what it does for the team."),
        click.Option(
            ["--provider"],
            required=True,
            help=f"Its CLI: {', '.join(PROVIDER_NAMES[:-1])} or {PROVIDER_NAMES[-1]}.",
        ),
        click.Option(["--web"], is_flag=True, help="It reads the web (its mail is marked)."),
        click.Option(
            ["--host"],
            metavar="DEST",
            help="A desk on another machine: anything ssh accepts (docs/remote.md).",
        ),
        click.Option(
            ["--ssh-arg", "ssh_args"],
            multiple=True,
            metavar="ARG",
            help="An ssh option word for --host (repeat it: --ssh-arg=-p --ssh-arg=2222).",
        ),
        click.Option(
            ["--cwd"],
            metavar="DIR",
            help="Where it works (on --host: a folder there; default: its home there, "
            "else the manager's folder).",
        ),
    ],
}


def _request(action: PersonAction, params: dict[str, Any]) -> ControlRequest:
    if action.target == "agent":
        return ControlRequest(
            cmd=action.name,
            agent=params["agent"],
            text=params.get("text") or "",
            enter=not params.get("no_enter", False),
        )
    if action.target == "message":
        return ControlRequest(cmd=action.name, message=params["message"], text=params["text"])
    if action.name == "hire":
        return ControlRequest(
            cmd=action.name,
            agent=params["agent"],
            name=params["name"],
            role=params["role"],
            provider=params["provider"],
            web=params["web"],
            host=params.get("host"),
            ssh_args=list(params.get("ssh_args") or ()),
            cwd=params.get("cwd") or "",
        )
    return ControlRequest(cmd=action.name)


def _hire_offline(paths: HivePaths, req: ControlRequest) -> ControlReply:
    """With no office running, the entry is written for the next start (under the
    office's lock, so an office starting meanwhile reads the file before or after)."""
    from hive_core.team.hire import HireRefused, hire_into, spec_from_request

    person_only(paths, "hire")
    try:
        with office_lock(paths):
            config = load_office(paths.office_toml)
            manager = next(a for a in config.agents if a.id == config.office.manager)
            spec = spec_from_request(req, manager.cwd)
            hire_into(paths.office_toml, spec)
    except OfficeBusy:
        fail("the office is starting; try again in a moment.")
    except (ConfigError, HireRefused) as e:
        return ControlReply(ok=False, error=str(e))
    return ControlReply(
        ok=True, detail=f"{spec.id} is on the roster in office.toml; it starts with the office."
    )


def _show(action: PersonAction, reply: ControlReply, params: dict[str, Any], home: Path) -> None:
    if action.name == "escalations" and not params.get("as_json"):
        waiting = msgspec.json.decode(reply.detail or "[]", type=list[Escalation])
        click.echo(render_escalations(waiting, home))
    elif action.name == "why" and not params.get("as_json"):
        click.echo(why_text(params["agent"], reply.detail))
    elif reply.detail:
        click.echo(reply.detail)


def render_escalations(waiting: list[Escalation], home: Path) -> str:
    """The person's waiting mail as lines; what others wrote is shown cleaned."""
    if not waiting:
        return "Nothing waits for you."
    sender_w = max(len(e.sender) for e in waiting)
    lines = [f"{len(waiting)} waiting for you, newest first:"]
    for e in waiting:
        flags = "".join(
            [
                " [needs human]" if e.needs_human else "",
                f" [task {preview(e.task)}]" if e.task else "",
            ]
        )
        subject = preview(e.subject) or "(no subject)"
        lines.append(f"  {e.id}  {preview(e.sender):<{sender_w}}  {subject}{flags}")
    lines.append(f"Answer one: `{office_command(home, 'answer', 'ID', 'TEXT')}`.")
    return "\n".join(lines)


def _action_command(action: PersonAction) -> click.Command:
    def callback(home: str | None, **params: Any) -> None:
        ctx = click.get_current_context()
        offline = _hire_offline if action.name == "hire" else None
        home = home or ctx.obj["home"]
        reply = _control(home, _request(action, params), offline)
        _show(action, reply, params, _paths(home).home)

    target = {"agent": [click.Argument(["agent"])], "message": [click.Argument(["message"])]}
    return click.Command(
        action.name,
        callback=callback,
        params=[
            click.Option(["--home"], metavar="DIR", help=HOME_HELP),
            *target.get(action.target, []),
            *_EXTRA.get(action.name, []),
        ],
        help=action.help,
        epilog=_EPILOGS.get(action.name),
    )


for _action in ACTIONS:
    cli.add_command(_action_command(_action))
# Letting an agent go is archiving it: its desk, mail and memory are kept.
cli.add_command(_action_command(BY_NAME["archive"]), name="fire")
for _command in OFFICE_COMMANDS:
    cli.add_command(_command)
cli.add_command(cost_command)


def main() -> None:
    cli(prog_name="hive-office")


if __name__ == "__main__":
    main()
