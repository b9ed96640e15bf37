"""`hive`: mail, board, triage, roster and log, for the agents and the person.

No verb here needs a running office. Sending writes a draft into the caller's own
outbox (the router delivers it, now or when the office starts); everything else reads
the caller's own folders or plain files of the hive. The caller is HIVE_AGENT_ID, or the
person (`human`) when it is unset.

Exit codes: 0 done; 1 refused or not found (the office state says no); 2 the command
line or the environment is wrong. Every failure is one sentence on stderr that says
what to do.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import click
import msgspec

from hive_core import kick, mail
from hive_core.caller import CallerError, authenticated_caller
from hive_core.cli import render
from hive_core.cli.mcp_cmd import mcp_command
from hive_core.cli.memory_cmd import memory_group
from hive_core.config import ConfigError, agent, load_office
from hive_core.fsio import atomic_write
from hive_core.hive import read_registry, registry_from_roster
from hive_core.paths import HivePaths, Mailbox, resolve_home
from hive_core.schema import ACTS, BODY_MAX, HUMAN, Act, Draft, LogEvent, OfficeConfig, is_agent_id

REFUSED = 1
USAGE = 2

HOME_HELP = "Office home (default: $HIVE_HOME, else ~/.hive-office)."
_HOME_KEY = "hive.home"
FOLLOW_POLL_SECONDS = 0.25

_log_decoder = msgspec.json.Decoder(LogEvent)


class HiveError(click.ClickException):
    """Refused or not found: one line on stderr, no traceback, exit 1."""

    exit_code = REFUSED

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"hive: {self.format_message()}", err=True)


class BadUsage(HiveError):
    """The command line or the environment is wrong: exit 2, like click's usage errors."""

    exit_code = USAGE


@dataclass(frozen=True)
class Office:
    paths: HivePaths
    config: OfficeConfig
    caller: str

    @property
    def box(self) -> Mailbox:
        return self.paths.mailbox(self.caller)

    @property
    def manager(self) -> str:
        return self.config.office.manager


def _remember_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # ctx.meta is shared by the group and the verb, so `hive --home X send` and
    # `hive send --home X` both work; the verb's option, parsed later, wins.
    if value is not None:
        ctx.meta[_HOME_KEY] = value


home_option = click.option(
    "--home", metavar="DIR", expose_value=False, callback=_remember_home, help=HOME_HELP
)


def open_office() -> Office:
    """The office of --home/HIVE_HOME and who is calling, or a HiveError saying why not."""
    paths = HivePaths(resolve_home(click.get_current_context().meta.get(_HOME_KEY)))
    if not paths.office_toml.is_file() or not paths.hive.is_dir():
        raise HiveError(
            f"there is no office in {paths.home}. Run `hive-office init` to create one, "
            "or point --home or HIVE_HOME at an existing office."
        )
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        raise HiveError(str(e)) from None
    return Office(paths, config, _caller(config))


def _caller(config: OfficeConfig) -> str:
    raw = os.environ.get("HIVE_AGENT_ID", "")
    if raw in ("", HUMAN):
        return HUMAN
    if agent(config, raw) is None:
        ids = ", ".join(a.id for a in config.agents)
        raise BadUsage(
            f"HIVE_AGENT_ID is {raw!r}, which is not an agent of this office ({ids}); "
            "unset it to act as the person (human).",
        )
    return raw


# --- reading text from the command line -------------------------------------------------


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadUsage(
            f"{source} is not UTF-8 text (bad byte at offset {e.start}); convert it to UTF-8.",
        ) from None


def read_source(source: str, limit: int | None = None) -> str:
    """The text of FILE, or of stdin for `-`, refusing more than `limit` bytes."""
    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = sys.stdin.buffer.read(-1 if limit is None else limit + 1)
        else:
            data = Path(source).read_bytes()
    except OSError as e:
        raise BadUsage(f"cannot read {name}: {e.strerror}. Check the path.") from None
    if limit is not None and len(data) > limit:
        raise BadUsage(
            f"{name} holds more than {limit} bytes, the limit for a message body. "
            "Shorten it or point to a file instead of pasting it.",
        )
    return _decode(data, name)


def body_text(body: str | None, dash: str | None) -> str:
    """The body from `--body TEXT`, `--body -` or a trailing `-` (both mean stdin)."""
    if dash is not None and dash != "-":
        raise BadUsage(
            f"unexpected argument {dash!r}: give the text with --body TEXT, or - to read stdin.",
        )
    if dash and body is not None:
        raise BadUsage("give the body once: either --body TEXT or -, not both.")
    if dash or body == "-":
        return read_source("-", BODY_MAX)
    return body or ""


def _check(draft: Draft) -> None:
    problem = mail.check_draft(draft)
    if problem:
        raise BadUsage(problem)


def _post(office: Office, draft: Draft) -> None:
    """Queue the draft in the caller's outbox and nudge the office, if one runs."""
    path = mail.write_draft(office.box, draft)
    where = path.relative_to(office.paths.hive)
    if kick.kick(office.paths, office.caller):
        click.echo(f"sent to {draft.to} ({where})")
    else:
        click.echo(
            f"queued {where}; the office is not running, it will be delivered when it starts"
        )


def _missing(message_id: str) -> HiveError:
    return HiveError(
        f"no message {message_id!r} in your inbox, inbox/.done or sent mail. "
        "`hive inbox` lists the unread ids."
    )


# --- the verbs --------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@home_option
def cli() -> None:
    """Mail, board, triage, roster and log of a hive-office.

    \b
    Who you are comes from HIVE_AGENT_ID (set for every agent); unset, you are
    the person at the keyboard (`human`). The office home is --home, $HIVE_HOME
    or ~/.hive-office. Nothing here needs the office to be running: mail waits
    in your outbox until it is.

    \b
      hive inbox                          what is waiting for me
      hive send --to jim --act request --subject "Review" --body "..."
      hive reply ID --body "Done, see src/parser.py"
      hive done ID
    """


@cli.command()
@click.option(
    "--to",
    "to",
    required=True,
    metavar="ID",
    help="An agent id, or god (the manager), human, broadcast, triage.",
)
@click.option(
    "--act",
    type=click.Choice(ACTS),
    default="inform",
    show_default=True,
    help="request, query and propose expect a reply; the others end a thread.",
)
@click.option("--subject", default="", help="One line, at most 200 characters.")
@click.option("--task", metavar="TASK", help="The task id this message is about.")
@click.option("--needs-human", is_flag=True, help="Ask the manager to bring the person in.")
@click.option("--body", metavar="TEXT", help="The message; `-` reads it from stdin.")
@click.argument("dash", required=False, metavar="[-]")
@home_option
def send(
    to: str,
    act: str,
    subject: str,
    task: str | None,
    needs_human: bool,
    body: str | None,
    dash: str | None,
) -> None:
    """Send a message (it goes to your outbox; the office delivers it).

    \b
      hive send --to jim --act request --subject "Review the parser" --body "See #12"
      hive send --to god --subject "Blocked on the API key" --needs-human --body "..."
      git diff | hive send --to pam --act propose --subject "Patch for the lexer" -
    """
    office = open_office()
    problem = mail.check_recipient(office.config, office.caller, to)
    if problem:
        raise BadUsage(problem)
    draft = Draft(
        to=to,
        act=cast(Act, act),
        subject=subject.strip(),
        body=body_text(body, dash),
        task=task or None,
        needs_human=needs_human,
    )
    _check(draft)
    if not draft.body.strip() and not draft.subject:
        raise BadUsage(
            "the message is empty: give --body TEXT (or - to read stdin), or at least --subject.",
        )
    _post(office, draft)


@cli.command()
@click.argument("msgid")
@click.option(
    "--act",
    type=click.Choice(ACTS),
    default="inform",
    show_default=True,
    help="agree, refuse, done, inform; or request/query/propose to ask back.",
)
@click.option("--needs-human", is_flag=True, help="Ask the manager to bring the person in.")
@click.option("--body", metavar="TEXT", help="The reply; `-` reads it from stdin.")
@click.argument("dash", required=False, metavar="[-]")
@home_option
def reply(msgid: str, act: str, needs_human: bool, body: str | None, dash: str | None) -> None:
    """Answer message MSGID: to its sender, in its thread, subject "Re: ...".

    \b
      hive reply 20261130T093450123456Z-1a2b3c --act agree --body "On it."
      hive reply 20261130T093450123456Z-1a2b3c --act done - < summary.md
    """
    office = open_office()
    found = mail.find_message(office.box, msgid)
    if found is None:
        raise _missing(msgid)
    parent = found[0]
    if parent.sender == office.caller:
        raise BadUsage(
            f"{msgid} is a message you sent; to follow it up, use "
            f"`hive send --to {parent.to}` instead.",
        )
    problem = mail.check_recipient(office.config, office.caller, parent.sender)
    if problem:
        raise HiveError(f"cannot reply to {msgid} from {parent.sender}: {problem}")
    draft = mail.reply_draft(parent, cast(Act, act), body_text(body, dash), needs_human=needs_human)
    _check(draft)
    if not draft.body.strip():
        raise BadUsage("the reply is empty: give --body TEXT, or - to read stdin.")
    _post(office, draft)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON list of messages.")
@home_option
def inbox(as_json: bool) -> None:
    """List your unread messages, oldest first.

    \b
      hive inbox
      hive inbox --json | jq '.[].id'
    """
    office = open_office()
    messages = list(mail.iter_inbox(office.box))
    if as_json:
        click.echo(msgspec.json.encode(messages).decode())
    else:
        click.echo(render.inbox(messages))


@cli.command()
@click.argument("msgid")
@click.option("--json", "as_json", is_flag=True, help="The message as JSON.")
@home_option
def read(msgid: str, as_json: bool) -> None:
    """Show message MSGID in full (unread, done, or one you sent).

    Reading does not mark it processed; `hive done MSGID` does.

    \b
      hive read 20261130T093450123456Z-1a2b3c
    """
    office = open_office()
    found = mail.find_message(office.box, msgid)
    if found is None:
        raise _missing(msgid)
    message, path = found
    if as_json:
        click.echo(msgspec.json.encode(message).decode())
        return
    box = office.box
    state = {box.inbox: "unread", box.done: "done", box.sent: "sent"}.get(path.parent, "")
    click.echo(render.message(message, state))


@cli.command()
@click.argument("msgids", nargs=-1, metavar="[MSGID]...")
@click.option("--all", "all_", is_flag=True, help="Every unread message.")
@home_option
def done(msgids: tuple[str, ...], all_: bool) -> None:
    """Mark messages processed (moved to inbox/.done, kept for the record).

    Do it after you have acted on a message, not when you have only read it.

    \b
      hive done 20261130T093450123456Z-1a2b3c
      hive done --all
    """
    if bool(msgids) == all_:
        raise BadUsage("give message ids or --all, not both and not neither.")
    office = open_office()
    box = office.box
    ids = list(msgids) or [path.stem for path in mail.message_files(box.inbox)]
    marked, already, missing = [], [], []
    for message_id in ids:
        if mail.mark_done(box, message_id):
            marked.append(message_id)
        elif (found := mail.find_message(box, message_id)) and found[1].parent == box.done:
            already.append(message_id)
        else:
            missing.append(message_id)
    if all_ and not ids:
        click.echo("No unread mail; nothing to mark.")
    if marked:
        noun = "message" if len(marked) == 1 else "messages"
        click.echo(f"marked {len(marked)} {noun} done")
    if already:
        click.echo(f"already done: {', '.join(already)}")
    if missing:
        raise HiveError(
            f"not in your inbox: {', '.join(missing)}. `hive inbox` lists the unread ids."
        )


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
    office = open_office()
    if source is not None and text is not None:
        raise BadUsage("give the new board with --write or --text, not both.")
    if source is None and text is None:
        try:
            current = _decode(office.paths.board.read_bytes(), "board.md")
        except FileNotFoundError:
            raise HiveError(
                f"{office.paths.board} is missing. Run `hive-office init` to recreate it."
            ) from None
        click.echo(render.clean(current), nl=not current.endswith("\n"))
        return
    try:
        # Writing the board is a privilege: the caller must prove who it is.
        caller = authenticated_caller(office.paths, office.config)
    except CallerError as e:
        raise HiveError(str(e)) from None
    if caller != office.manager:
        raise HiveError(
            f"only the manager ({office.manager}) writes the board. File what should change "
            f'with `hive triage "..."` or send it with `hive send --to god`.'
        )
    new = text if text is not None else read_source(source or "-")
    atomic_write(office.paths.board, new.encode())
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
    office = open_office()
    joined = " ".join(text)
    joined = read_source("-", BODY_MAX) if joined == "-" else joined
    if not joined.strip():
        raise BadUsage('the request is empty: say what is needed, e.g. hive triage "...".')
    draft = mail.triage_draft(joined)
    _check(draft)
    _post(office, draft)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="The registry as JSON.")
@home_option
def roster(as_json: bool) -> None:
    """Who is on the floor: ids, names, providers, status, roles (* = the manager).

    \b
      hive roster
      hive roster --json
    """
    office = open_office()
    registry = registry_from_roster(office.config, read_registry(office.paths))
    if as_json:
        click.echo(msgspec.json.encode(registry).decode())
    else:
        click.echo(render.roster(registry, office.caller))


def _involves(event: LogEvent, who: str) -> bool:
    return who in (event.agent, event.sender, event.to) or who in event.recipients


def _complete_lines(data: bytes) -> bytes:
    # The router may be mid-append; a line without its newline is not an event yet.
    return data[: data.rfind(b"\n") + 1]


def _events(data: bytes, who: str | None) -> list[LogEvent]:
    events = []
    for line in data.splitlines():
        try:
            event = _log_decoder.decode(line)
        except msgspec.DecodeError:
            continue  # a blank or foreign line never hides the rest of the feed
        if who is None or _involves(event, who):
            events.append(event)
    return events


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
    """What the office has been doing (hive/log.jsonl), newest last.

    \b
      hive log -n 50
      hive log --agent jim --follow
      hive log --json -n 0 | jq -c 'select(.kind == "bounce")'
    """
    if who is not None and not is_agent_id(who):
        raise BadUsage(f"--agent {who!r} is not an agent id; `hive roster` lists them.")
    office = open_office()
    path = office.paths.log

    def show(events: list[LogEvent]) -> None:
        for event in events:
            click.echo(msgspec.json.encode(event).decode() if as_json else render.log_event(event))

    try:
        data = _complete_lines(path.read_bytes())
    except FileNotFoundError:
        data = b""
    events = _events(data, who)
    show(events[-count:] if count else events)
    if follow:
        # Ctrl+C is how a follow ends, not a failure.
        with contextlib.suppress(KeyboardInterrupt):
            _follow(path, len(data), lambda chunk: show(_events(chunk, who)))


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


from hive_core.cli import task_cmd  # noqa: E402  (task_cmd builds on the helpers above)

cli.add_command(task_cmd.task)


cli.add_command(memory_group)
cli.add_command(mcp_command)


def main() -> None:
    try:
        cli(prog_name="hive")
    except OSError as e:
        # Permissions, a full disk, a file in the way: say so instead of a traceback.
        where = f" ({e.filename})" if e.filename else ""
        click.echo(f"hive: {e.strerror or e}{where}. Check the office home.", err=True)
        raise SystemExit(REFUSED) from None


if __name__ == "__main__":
    main()
