"""What every `hive` verb shares: the office home, who is calling, the errors and how
they end a command, and text read from the command line.

The mail verbs (cli/mail_cmd.py) start from here on every mail action, so nothing here
imports click at module level: `home_option` and `click_home` import it when a click
verb is built or run.

Exit codes: 0 done; 1 refused or not found (the office state says no); 2 the command
line or the environment is wrong. Every failure is one sentence on stderr that says
what to do.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import msgspec

from hive_client.client import split_home as split_home
from hive_core import invocation, mail
from hive_core.caller import BadClaim, Caller, CallerError, identify, proven
from hive_core.config import ConfigError, load_office
from hive_core.errors import OfficeError
from hive_core.hint import office_command
from hive_core.invocation import RELAYED_ENV as RELAYED_ENV
from hive_core.paths import HivePaths, resolve_home
from hive_core.schema import BODY_MAX, Draft

if TYPE_CHECKING:
    import click

REFUSED = 1
USAGE = 2

HOME_HELP = "Office home (default: $HIVE_HOME, else ~/.hive-office)."
# ctx.meta is shared by a group and its verbs, so `hive --home X board` and
# `hive board --home X` both work; the verb's option, parsed later, wins.
_HOME_KEY = "hive.home"

F = TypeVar("F", bound=Callable[..., object])


def relayed() -> bool:
    """Whether this verb was relayed from a remote desk's host by the office."""
    return invocation.getenv(RELAYED_ENV) is not None


class HiveError(OfficeError):
    """Refused or not found: one line on stderr, no traceback, exit 1."""

    exit_code = REFUSED


class BadUsage(HiveError):
    """The command line or the environment is wrong: exit 2, like a usage error."""

    exit_code = USAGE


def fail(message: str, code: int, prog: str = "hive") -> NoReturn:
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(code)


@contextlib.contextmanager
def one_line_errors(prog: str = "hive") -> Iterator[None]:
    """A refusal, or an OSError of the office home, as one line and its exit code."""
    try:
        yield
    except HiveError as e:
        fail(str(e), e.exit_code, prog)
    except OSError as e:
        # Permissions, a full disk, a file in the way: say so instead of a traceback.
        where = f" ({e.filename})" if e.filename else ""
        fail(f"{e.strerror or e}{where}. Check the office home.", REFUSED, prog)


# --- the office home ---------------------------------------------------------------------


def home_option(f: F) -> F:
    """The click verbs' `--home DIR`, remembered for `click_home`."""
    import click

    def remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            ctx.meta[_HOME_KEY] = value

    option = click.option(
        "--home", metavar="DIR", expose_value=False, callback=remember, help=HOME_HELP
    )
    return option(f)


def click_home() -> str | None:
    """The --home of the click command line being run (None: HIVE_HOME, else the default)."""
    import click

    home: str | None = click.get_current_context().meta.get(_HOME_KEY)
    return home


# --- who is calling ----------------------------------------------------------------------


def office_paths(home: str | None) -> HivePaths:
    """The office of `home` (else HIVE_HOME), or a HiveError if there is none."""
    if home is not None:
        running = invocation.current()
        # The office serves only its own home, and a remote desk's host has no other.
        serves = running.home if running is not None else resolve_home(None)
        if relayed() and resolve_home(home) != serves:
            raise BadUsage(
                "--home names a folder on the office's machine, and a remote desk works "
                "only in its own office; drop --home."
            )
        if running is not None and resolve_home(home) != serves:
            raise BadUsage(
                f"--home names another office than the one running this command ({serves}); "
                "run `hive` with that office's home in HIVE_HOME instead."
            )
    paths = HivePaths(resolve_home(home))
    if not paths.office_toml.is_file() or not paths.hive.is_dir():
        raise HiveError(
            f"there is no office in {paths.home}. Run `{office_command(paths.home, 'init')}` "
            "to create one, or point --home or HIVE_HOME at an existing office."
        )
    return paths


def open_caller(home: str | None, *, proof: bool = False) -> Caller:
    """The office of `home` and who is calling it (caller.identify: the office decides
    while it runs). `proof`: the verb changes what only a proven caller may change."""
    paths = office_paths(home)
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        raise HiveError(str(e)) from None
    try:
        caller = identify(paths, config)
    except BadClaim as e:
        raise BadUsage(str(e)) from None
    except CallerError as e:
        raise HiveError(str(e)) from None
    return require_proof(caller) if proof else caller


def require_proof(caller: Caller) -> Caller:
    """`caller`, if the office proved it (caller.proven); else a HiveError saying why."""
    try:
        return proven(caller)
    except CallerError as e:
        raise HiveError(str(e)) from None


def post(caller: Caller, draft: Draft, *, as_json: bool = False) -> None:
    """Send the draft from the caller (mail.send) and say where it went (`as_json`: as
    `hive send --json` says it)."""
    try:
        path, delivered = mail.send(caller.paths, caller.config, caller.who, draft)
    except mail.DraftRefused as e:
        raise BadUsage(str(e)) from None
    where = path.relative_to(caller.paths.hive)
    if as_json:
        print(msgspec.json.encode({"path": str(where), "delivered_now": delivered}).decode())
    elif delivered:
        print(f"sent to {draft.to} ({where})")
    else:
        print(f"queued {where}; the office is not running, it will be delivered when it starts")


# --- text from the command line ------------------------------------------------------------


def decode_text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadUsage(
            f"{source} is not UTF-8 text (bad byte at offset {e.start}); convert it to UTF-8.",
        ) from None


def read_source(source: str, limit: int | None = BODY_MAX) -> str:
    """The text of FILE, or of stdin for `-`, refusing more than `limit` bytes."""
    name = "stdin" if source == "-" else source
    if source != "-" and relayed():
        raise BadUsage(
            f"{source} would be read on the office's machine, not on this host; give the "
            f"text on stdin instead (`- < {source}`)."
        )
    try:
        if source == "-":
            data = sys.stdin.buffer.read(-1 if limit is None else limit + 1)
        elif (running := invocation.current()) is not None:
            # Read by the caller's process, not the office's (hive_core/invocation.py).
            data = running.read(source, None if limit is None else limit + 1)
        else:
            data = Path(source).read_bytes()
    except OSError as e:
        raise BadUsage(f"cannot read {name}: {e.strerror}. Check the path.") from None
    if limit is not None and len(data) > limit:
        raise BadUsage(
            f"{name} holds more than {limit} bytes, the limit for a message body. "
            "Shorten it or point to a file instead of pasting it.",
        )
    return decode_text(data, name)


def text_or_stdin(value: str) -> str:
    """TEXT as given, or stdin for `-`."""
    return read_source("-") if value == "-" else value


def body_text(body: str | None, dash: str | None) -> str:
    """The body from `--body TEXT`, `--body -` or a trailing `-` (both mean stdin)."""
    if dash is not None and dash != "-":
        raise BadUsage(
            f"unexpected argument {dash!r}: give the text with --body TEXT, or - to read stdin.",
        )
    if dash and body is not None:
        raise BadUsage("give the body once: either --body TEXT or -, not both.")
    if dash or body == "-":
        return read_source("-")
    return body or ""
