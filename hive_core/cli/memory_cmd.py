"""`hive memory`: note, search, promote and reindex the office's memory.

The caller is the authenticated agent (hive_core.caller: HIVE_AGENT_ID, proven with
its secret while the office runs) or the person when HIVE_AGENT_ID is unset; it is
never an option, so an agent cannot search as another. Exit codes as for every `hive`
verb: 0 done, 1 refused or not found, 2 bad usage or environment.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import IO, Any, cast

import click
import msgspec

from hive_core.caller import CallerError, authenticated_caller
from hive_core.cli import render
from hive_core.config import ConfigError, load_office
from hive_core.memory import (
    CallerRefused,
    Hit,
    MemoryStore,
    MemoryStoreError,
    SemanticUnavailable,
    note,
    open_store,
    promote,
)
from hive_core.memory.store import Mode, SearchScope
from hive_core.memory.tidy import tidy_command
from hive_core.paths import HivePaths, resolve_home
from hive_core.schema import HUMAN

REFUSED = 1
USAGE = 2
# ctx.meta is shared with `hive`'s own --home (same key), so `hive --home X memory search`
# and `hive memory search --home X` both work.
_HOME_KEY = "hive.home"


class MemoryCliError(click.ClickException):
    """Refused or not found: one line on stderr, exit 1."""

    exit_code = REFUSED

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"hive: {self.format_message()}", err=True)


class MemoryUsageError(MemoryCliError):
    """The command line or the environment is wrong: exit 2."""

    exit_code = USAGE


def _remember_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[_HOME_KEY] = value


home_option = click.option(
    "--home",
    metavar="DIR",
    expose_value=False,
    callback=_remember_home,
    help="Office home (default: $HIVE_HOME, else ~/.hive-office).",
)


@dataclass(frozen=True)
class Caller:
    paths: HivePaths
    who: str


def _caller() -> Caller:
    paths = HivePaths(resolve_home(click.get_current_context().meta.get(_HOME_KEY)))
    if not paths.office_toml.is_file() or not paths.hive.is_dir():
        raise MemoryCliError(
            f"there is no office in {paths.home}. Run `hive-office init` to create one, "
            "or point --home or HIVE_HOME at an existing office."
        )
    try:
        config = load_office(paths.office_toml)
        who = authenticated_caller(paths, config)
    except ConfigError as e:
        raise MemoryCliError(str(e)) from None
    except CallerError as e:
        raise MemoryUsageError(str(e)) from None
    return Caller(paths, who)


def _store(paths: HivePaths) -> MemoryStore:
    try:
        store = open_store(paths)
    except ConfigError as e:
        raise MemoryCliError(str(e)) from None
    # A damaged memory.db was rebuilt from the hive: say so, the command goes on.
    for line in store.recovered:
        click.echo(f"hive: {line}", err=True)
    return store


def _read_text(words: tuple[str, ...]) -> str:
    joined = " ".join(words)
    if joined != "-":
        return joined
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MemoryUsageError(
            f"stdin is not UTF-8 text (bad byte at offset {e.start}); convert it to UTF-8."
        ) from None


def _render(hits: list[Hit]) -> str:
    if not hits:
        return "No matches."
    lines = []
    for hit in hits:
        entry = hit.entry
        where = entry.owner if entry.scope == "own" else "office"
        lines.append(f"{hit.id}  {entry.source:<8} {where:<10} {entry.path}")
        lines.append(f"    {render.one_line(entry.text)}")
    return "\n".join(lines)


@click.group("memory", context_settings={"help_option_names": ["-h", "--help"]})
@home_option
def memory_group() -> None:
    """Your notes and the office's knowledge: write, search, promote.

    \b
    own     your private notes, memory.md and archive (nobody else reads them)
    office  board, tasks, triage, promoted knowledge, and messages you sent or received

    \b
      hive memory note "The CI runner has no GPU; skip the cuda tests"
      hive memory search "cuda tests" --scope own
      hive memory search parse_config --json | jq '.[0].entry.text'
      hive memory promote 3f9c2a7d01b4e6aa        (manager or person)
      hive memory reindex
    """


@memory_group.command("note")
@click.argument("text", nargs=-1, required=True)
@home_option
def note_cmd(text: tuple[str, ...]) -> None:
    """Add TEXT to your notes (agents/<you>/memory/notes.md); `-` reads stdin.

    Notes are private (scope own) and searchable at once; tidying folds them into
    memory.md later.

    \b
      hive memory note "pytest -k router is the fast loop for routing changes"
      git log -1 --format=%B | hive memory note -
    """
    caller = _caller()
    if caller.who == HUMAN:
        raise MemoryUsageError(
            "notes belong to agents and you are the person (HIVE_AGENT_ID is unset); "
            "put office knowledge on the board or promote an agent's note."
        )
    with _store(caller.paths) as store:
        try:
            entry = note(caller.paths, caller.who, _read_text(text), store)
        except ValueError as e:
            raise MemoryUsageError(str(e)) from None
    click.echo(f"noted {entry.id} ({entry.path})")


@memory_group.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option(
    "--scope",
    type=click.Choice(["own", "office", "all"]),
    default="all",
    show_default=True,
    help="own: your private memory; office: shared knowledge and your mail; all: both.",
)
@click.option(
    "--mode",
    type=click.Choice(["keyword", "semantic", "hybrid"]),
    default="keyword",
    show_default=True,
    help="semantic and hybrid need the extra: pip install 'hive-office[semantic]'.",
)
@click.option("--semantic", "semantic_flag", is_flag=True, help="Short for --mode semantic.")
@click.option(
    "-n", "--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="At most N."
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list of hits (id, score, entry).")
@home_option
def search_cmd(
    query: tuple[str, ...], scope: str, mode: str, semantic_flag: bool, limit: int, as_json: bool
) -> None:
    """Search memory for QUERY within your scope, best match first.

    Keyword search finds near-identical text: any case or punctuation, other word
    forms (timeout/timeouts/timed out), and pieces of identifiers (parse_conf).

    \b
      hive memory search "flaky router test"
      hive memory search parse_config --scope own
      hive memory search "who owns the release" --scope office --json
    """
    caller = _caller()
    with _store(caller.paths) as store:
        try:
            hits = store.search(
                " ".join(query),
                caller.who,
                cast(SearchScope, scope),
                limit,
                cast(Mode, "semantic" if semantic_flag else mode),
            )
        except CallerRefused as e:
            raise MemoryUsageError(str(e)) from None
        except SemanticUnavailable as e:
            raise MemoryCliError(str(e)) from None
    if as_json:
        click.echo(msgspec.json.encode(hits).decode())
    else:
        click.echo(_render(hits))


@memory_group.command("promote")
@click.argument("entry_id")
@home_option
def promote_cmd(entry_id: str) -> None:
    """Make private memory ENTRY_ID office knowledge (the manager or the person only).

    The text is copied to promoted/<ENTRY_ID>.json in the hive, which everyone can
    search; deleting that file takes it back.

    \b
      hive memory promote 3f9c2a7d01b4e6aa
    """
    caller = _caller()
    try:
        with _store(caller.paths) as store:
            entry = promote(caller.paths, entry_id, caller.who, store)
    except MemoryStoreError as e:
        raise MemoryCliError(str(e)) from None
    click.echo(f"promoted {entry_id} to office knowledge as {entry.id} ({entry.path})")


@memory_group.command("reindex")
@home_option
def reindex_cmd() -> None:
    """Rebuild memory.db from the hive (safe at any time; the hive is the truth).

    \b
      hive memory reindex
    """
    caller = _caller()
    with _store(caller.paths) as store:
        count = store.reindex()
    for line in store.refused:
        click.echo(f"hive: skipped {line}", err=True)
    click.echo(f"indexed {count} entries into {caller.paths.memory_db}")


# The tidy lives with the memory index it keeps in budget; `hive memory tidy` runs it.
memory_group.add_command(tidy_command)
