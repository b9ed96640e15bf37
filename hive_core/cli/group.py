"""The `hive` click group: board, triage, roster, log, and the task, memory and mcp groups.

`hive.main` hands it every verb but the mail verbs, which run without click
(cli/mail_cmd.py). The group still lists them, so `hive --help` shows every verb; run
through the group, a mail verb gets its words unparsed and hands them to the same code.
The task, memory, ci-logs and mcp groups are imported only when called (or listed by `--help`):
memory and mcp pull in SQLite, asyncio and the mcp package.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
import msgspec

from hive_core import mail, render
from hive_core.caller import Caller
from hive_core.cli.common import (
    BadUsage,
    HiveError,
    click_home,
    decode_text,
    home_option,
    open_caller,
    post,
    read_source,
)
from hive_core.cli.mail_cmd import MAIL_VERBS, run_verb
from hive_core.fsio import atomic_write
from hive_core.hint import office_command
from hive_core.hive import read_registry, registry_from_roster
from hive_core.logfile import iter_log_lines
from hive_core.schema import JSON_DEPTH_MAX, LogEvent, is_agent_id, json_depth

FOLLOW_POLL_SECONDS = 0.25

_log_decoder = msgspec.json.Decoder(LogEvent)

# name -> (module, attribute) of the groups imported on first use.
_LAZY = {
    "task": ("hive_core.cli.task_cmd", "task"),
    "memory": ("hive_core.cli.memory_cmd", "memory_group"),
    "ci-logs": ("hive_core.cli.ci_cmd", "ci_group"),
    "mcp": ("hive_core.cli.mcp_cmd", "mcp_command"),
    "merge": ("hive_core.cli.worktree_cmd", "hive_merge"),
    "lease": ("hive_core.cli.lease_cmd", "lease_command"),
    "release": ("hive_core.cli.lease_cmd", "release_command"),
}


class _HiveGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*self.commands, *_LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY:
            module, attribute = _LAZY[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        # The verbs refuse with HiveError (cli/common.py), which knows nothing of click.
        try:
            return super().invoke(ctx)
        except HiveError as e:
            click.echo(f"hive: {e}", err=True)
            ctx.exit(e.exit_code)


def current_caller(*, proof: bool = False) -> Caller:
    """The office of this command line's --home (else HIVE_HOME) and its caller."""
    return open_caller(click_home(), proof=proof)


@click.group(
    cls=_HiveGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="hive-office", prog_name="hive")
@home_option
def cli() -> None:
    """Mail, board, triage, roster and log of a hive-office.

    \b
    Who you are: while the office runs, it tells from your process (an agent is
    who it was started as; anyone else is the person, `human`). With no office
    running, HIVE_AGENT_ID says it (unset: the person); mail then waits in your
    outbox, and writing the board or the tasks waits for the office. The office
    home is --home, $HIVE_HOME or ~/.hive-office.

    \b
      hive inbox                          what is waiting for me
      hive send --to jim --act request --subject "Review" --body "..."
      hive reply ID --body "Done, see src/parser.py"
      hive done ID
    """


def _mail_verb(verb: str) -> click.Command:
    def run(words: tuple[str, ...]) -> None:
        run_verb(verb, list(words), click_home())

    return click.Command(
        verb,
        callback=run,
        params=[click.Argument(["words"], nargs=-1, type=click.UNPROCESSED)],
        help=MAIL_VERBS[verb].spec.about.split("\n", 1)[0],
        add_help_option=False,
        context_settings={"ignore_unknown_options": True},
    )


for _verb in MAIL_VERBS:
    cli.add_command(_mail_verb(_verb))


@cli.command()
@click.option(
    "--write",
    "source",
    metavar="FILE|-",
    help="Replace the board with FILE (or stdin). The manager only.",
)
@click.option("--text", help="Replace the board with TEXT. The manager only.")
@home_option
def board(source: str | None, text: str | None) -> None:
    """Print the shared plan (board.md); the manager rewrites it with --write or --text.

    \b
      hive board
      hive board --write plan.md          (manager)
      hive board --write - < plan.md      (manager)
      hive board --text "# Plan ..."      (manager)
    """
    if source is not None and text is not None:
        raise BadUsage("give the new board with --write or --text, not both.")
    writes = source is not None or text is not None
    # Writing the board is a privilege: the caller must be proven.
    caller = current_caller(proof=writes)
    if not writes:
        try:
            current = decode_text(caller.paths.board.read_bytes(), "board.md")
        except FileNotFoundError:
            raise HiveError(
                f"{caller.paths.board} is missing. Run "
                f"`{office_command(caller.paths.home, 'init')}` to recreate it."
            ) from None
        click.echo(render.clean(current), nl=not current.endswith("\n"))
        return
    if caller.who != caller.manager:
        raise HiveError(
            f"only the manager ({caller.manager}) writes the board. File what should change "
            f'with `hive triage "..."` or send it with `hive send --to god`.'
        )
    new = text if text is not None else read_source(source or "-", None)
    atomic_write(caller.paths.board, new.encode())
    click.echo(f"board updated ({len(new.encode())} bytes)")


@cli.command()
@click.argument("text", nargs=-1, required=True)
@home_option
def triage(text: tuple[str, ...]) -> None:
    """File a request for the manager (a bug, an idea, a need); `-` reads stdin.

    The first line becomes the subject. The manager works requests oldest first.

    \b
      hive triage "The test suite is flaky on CI: test_router times out"
      hive triage - < bug-report.md
    """
    caller = current_caller()
    joined = " ".join(text)
    post(caller, mail.triage_draft(read_source("-") if joined == "-" else joined))


@cli.command()
@click.option(
    "--json", "as_json", is_flag=True, help="The registry as JSON, with each agent's usage."
)
@home_option
def roster(as_json: bool) -> None:
    """Who is on the floor: ids, names, providers, status, estimated cost, roles
    (* = the manager).

    \b
      hive roster
      hive roster --json
    """
    # Here, not at the top: the cost package brings asyncio, and only the roster needs it.
    from hive_core.cost import label, read_usage_file

    caller = current_caller()
    registry = registry_from_roster(caller.config, read_registry(caller.paths))
    # The sums the office wrote at its last pass (`hive-office cost` reads the records).
    usage = read_usage_file(caller.paths).agents
    if as_json:
        data = msgspec.to_builtins(registry)
        for entry in data["agents"]:
            if entry["id"] in usage:
                entry["usage"] = msgspec.to_builtins(usage[entry["id"]])
        click.echo(msgspec.json.encode(data).decode())
    else:
        costs = {agent: label(total) for agent, total in usage.items()}
        click.echo(render.roster(registry, caller.who, costs))


def _involves(event: LogEvent, who: str) -> bool:
    return who in (event.agent, event.sender, event.to) or who in event.recipients


def _complete_lines(data: bytes) -> bytes:
    # The router may be mid-append; a line without its newline is not an event yet.
    return data[: data.rfind(b"\n") + 1]


def _event(line: bytes, who: str | None) -> LogEvent | None:
    """The event on `line` if it is one about `who` (anyone if None). A blank, foreign
    or too deeply nested line is passed over: it never hides the rest of the feed."""
    if json_depth(line) > JSON_DEPTH_MAX:
        return None  # msgspec would recurse into it and raise RecursionError
    try:
        event = _log_decoder.decode(line)
    except msgspec.DecodeError:
        return None
    return event if who is None or _involves(event, who) else None


def _events(lines: Iterable[bytes], who: str | None) -> list[LogEvent]:
    return [event for line in lines if (event := _event(line, who)) is not None]


@cli.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events until Ctrl+C.")
@click.option("--json", "as_json", is_flag=True, help="One JSON event per line (JSON Lines).")
@click.option("--agent", "who", metavar="ID", help="Only events from, to or about ID.")
@click.option(
    "-n",
    "count",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="How many recent events to show first; 0 shows all.",
)
@home_option
def log(follow: bool, as_json: bool, who: str | None, count: int) -> None:
    """What the office has been doing (hive/log.jsonl and its segments), newest last.

    \b
      hive log -n 50
      hive log --agent jim --follow
      hive log --json -n 0 | jq -c 'select(.kind == "bounce")'
    """
    if who is not None and not is_agent_id(who):
        raise BadUsage(f"--agent {who!r} is not an agent id; `hive roster` lists them.")
    caller = current_caller()
    path = caller.paths.log

    def show(events: list[LogEvent]) -> None:
        for event in events:
            click.echo(msgspec.json.encode(event).decode() if as_json else render.log_event(event))

    # Where following starts is taken first: an event appended meanwhile may then show
    # twice, never not at all.
    try:
        offset = len(_complete_lines(path.read_bytes())) if follow else 0
    except FileNotFoundError:
        offset = 0
    history = iter_log_lines(caller.paths, count, keep=lambda line: _event(line, who) is not None)
    show(_events(history, who))
    if follow:
        # Ctrl+C is how a follow ends, not a failure.
        with contextlib.suppress(KeyboardInterrupt):
            _follow(path, offset, lambda chunk: show(_events(chunk.splitlines(), who)))


def _follow(path: Path, offset: int, emit: Callable[[bytes], None]) -> None:
    while True:
        time.sleep(FOLLOW_POLL_SECONDS)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if size < offset:
            offset = 0  # truncated or replaced: start over from its beginning
        if size == offset:
            continue
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = _complete_lines(f.read(size - offset))
        offset += len(chunk)
        emit(chunk)
