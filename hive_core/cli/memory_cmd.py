"""`hive memory`: note, search, promote, forget, edit and reindex the office's memory.

The caller is who the office says the calling process is (hive_core.caller); it is
never an option, so an agent cannot search as another. Writing (note, promote) needs
the office running to prove it. Exit codes as for every `hive` verb: 0 done, 1 refused
or not found, 2 bad usage or environment.
"""

from __future__ import annotations

import sys
from typing import cast

import click
import msgspec

from hive_core import render
from hive_core.caller import Caller, CallerError
from hive_core.cli.common import (
    BadUsage,
    HiveError,
    click_home,
    home_option,
    open_caller,
    read_source,
)
from hive_core.config import ConfigError, agent
from hive_core.memory import (
    CallerRefused,
    Filters,
    Hit,
    MemoryStore,
    MemoryStoreError,
    SemanticUnavailable,
    edit,
    forget,
    note,
    open_store,
    promote,
    search,
)
from hive_core.memory.entry import SOURCES
from hive_core.memory.store import Mode, SearchScope
from hive_core.memory.write import changeable
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN


def _caller(*, proof: bool = False) -> Caller:
    return open_caller(click_home(), proof=proof)


def _store(paths: HivePaths) -> MemoryStore:
    try:
        store = open_store(paths)
    except ConfigError as e:
        raise HiveError(str(e)) from None
    # A damaged memory.db was rebuilt from the hive: say so, the command goes on.
    for line in store.recovered:
        click.echo(f"hive: {line}", err=True)
    return store


def _read_text(words: tuple[str, ...]) -> str:
    joined = " ".join(words)
    return read_source("-", None) if joined == "-" else joined


def _said(text: str, entry_id: str, path: str, as_json: bool) -> None:
    """What a change did: the sentence, or the entry as JSON (what MCP's tools return)."""
    click.echo(msgspec.json.encode({"id": entry_id, "path": path}).decode() if as_json else text)


def _render(hits: list[Hit]) -> str:
    if not hits:
        return "No matches."
    lines = []
    for hit in hits:
        entry = hit.entry
        # The path is a file an agent named: shown, never obeyed, like the text.
        line = f"{hit.id}  {entry.source:<8} {entry.whose:<16} {entry.path}"
        lines.append(render.clean(line, lines=False))
        lines.append(f"    {render.preview(entry.text)}")
    return "\n".join(lines)


@click.group("memory", context_settings={"help_option_names": ["-h", "--help"]})
@home_option
def memory_group() -> None:
    """Your notes and the office's knowledge: write, search, promote.

    \b
    own     your private notes, memory.md and archive (no other agent reads them)
    office  board, tasks, triage, promoted knowledge, and messages you sent or received
    all     both; for the person, every agent's private memory too (labelled by owner)

    \b
      hive memory note "The CI runner has no GPU; skip the cuda tests"
      hive memory search "cuda tests" --scope own
      hive memory search parse_config --json | jq '.[0].entry.text'
      hive memory search --source task --tag status:blocked
      hive memory promote 3f9c2a7d01b4e6aa        (manager or person)
      hive memory edit 3f9c2a7d01b4e6aa --text "CI runners have no GPU"
      hive memory forget 3f9c2a7d01b4e6aa
      hive memory reindex
    """


@memory_group.command("note")
@click.argument("text", nargs=-1, required=True)
@click.option(
    "--json", "as_json", is_flag=True, help='Say the entry as JSON: {"id": ..., "path": ...}.'
)
@home_option
def note_cmd(text: tuple[str, ...], as_json: bool) -> None:
    """Add TEXT to your notes (agents/<you>/memory/notes.md); `-` reads stdin.

    Notes are private (scope own) and searchable at once; tidying folds them into
    memory.md later.

    \b
      hive memory note "pytest -k router is the fast loop for routing changes"
      git log -1 --format=%B | hive memory note -
    """
    caller = _caller(proof=True)
    if caller.who == HUMAN:
        raise BadUsage(
            "notes belong to agents and you are the person (HIVE_AGENT_ID is unset); "
            "put office knowledge on the board or promote an agent's note."
        )
    with _store(caller.paths) as store:
        try:
            entry = note(caller.paths, caller.who, _read_text(text), store)
        except ValueError as e:
            raise BadUsage(str(e)) from None
    _said(f"noted {entry.id} ({entry.path})", entry.id, entry.path, as_json)


@memory_group.command("search")
@click.argument("query", nargs=-1)
@click.option(
    "--scope",
    type=click.Choice(["own", "office", "all"]),
    default="all",
    show_default=True,
    help="own: your private memory; office: shared knowledge and your mail; all: both "
    "(for the person: every agent's private memory too).",
)
@click.option(
    "--mode",
    type=click.Choice(["keyword", "semantic", "hybrid"]),
    default="keyword",
    show_default=True,
    help="semantic and hybrid need the extra: scripts/setup --semantic.",
)
@click.option("--semantic", "semantic_flag", is_flag=True, help="Short for --mode semantic.")
@click.option(
    "--tag", "tags", multiple=True, metavar="TAG", help="Only entries with TAG (exact; repeatable)."
)
@click.option("--source", type=click.Choice(SOURCES), help="Only entries from this source.")
@click.option("--external-id", metavar="ID", help="Only the entry with this external id.")
@click.option(
    "-n", "--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="At most N."
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list of hits (id, score, entry).")
@home_option
def search_cmd(
    query: tuple[str, ...],
    scope: str,
    mode: str,
    semantic_flag: bool,
    tags: tuple[str, ...],
    source: str | None,
    external_id: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Search memory for QUERY within your scope, best match first.

    Keyword search finds near-identical text: any case or punctuation, other word
    forms (timeout/timeouts/timed out), and pieces of identifiers (parse_conf).
    --tag, --source and --external-id are exact filters; with no QUERY they list
    the entries they match, newest first.

    \b
      hive memory search "flaky router test"
      hive memory search parse_config --scope own
      hive memory search "who owns the release" --scope office --json
      hive memory search --source task --tag status:blocked
      hive memory search --external-id t-0007
    """
    filters = Filters(tags=tags, source=source, external_id=external_id)
    if not query and filters.empty:
        raise BadUsage("give a QUERY, or filter with --tag, --source or --external-id.")
    caller = _caller()
    chosen = cast(Mode, "semantic" if semantic_flag else mode)
    try:
        if chosen == "keyword":
            with _store(caller.paths) as store:
                hits = store.search(
                    " ".join(query), caller.who, cast(SearchScope, scope), limit, chosen, filters
                )
        else:
            # The model is the office's, loaded once.
            hits = search(
                caller.paths,
                " ".join(query),
                caller.who,
                cast(SearchScope, scope),
                limit,
                chosen,
                filters,
                tell=lambda line: click.echo(f"hive: {line}", err=True),
            )
    except (CallerRefused, ValueError) as e:
        raise BadUsage(str(e)) from None
    except (SemanticUnavailable, CallerError, ConfigError) as e:
        raise HiveError(str(e)) from None
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
    caller = _caller(proof=True)
    try:
        with _store(caller.paths) as store:
            entry = promote(caller.paths, entry_id, caller.who, store)
    except MemoryStoreError as e:
        raise HiveError(str(e)) from None
    click.echo(f"promoted {entry_id} to office knowledge as {entry.id} ({entry.path})")


@memory_group.command("forget")
@click.argument("entry_id")
@click.option(
    "--json", "as_json", is_flag=True, help='Say the entry as JSON: {"id": ..., "path": ...}.'
)
@home_option
def forget_cmd(entry_id: str, as_json: bool) -> None:
    """Remove ENTRY_ID from memory: the piece is taken out of the hive file it came from.

    Your own private memory; office knowledge (board, promoted) the manager or the
    person. Mail and tasks are not forgotten (`hive done`, `hive task`).

    \b
      hive memory forget 3f9c2a7d01b4e6aa
    """
    caller = _caller(proof=True)
    try:
        with _store(caller.paths) as store:
            entry = forget(caller.paths, entry_id, caller.who, store)
    except MemoryStoreError as e:
        raise HiveError(str(e)) from None
    _said(f"forgot {entry_id} ({entry.source} in {entry.path})", entry.id, entry.path, as_json)


@memory_group.command("edit")
@click.argument("entry_id")
@click.option("--text", help="The new text; `-` reads stdin. Without it: stdin, or $EDITOR.")
@click.option(
    "--json", "as_json", is_flag=True, help='Say the entry as JSON: {"id": ..., "path": ...}.'
)
@home_option
def edit_cmd(entry_id: str, text: str | None, as_json: bool) -> None:
    """Replace the text of ENTRY_ID in the hive file it came from.

    Who may: as for `forget`. The text comes from --text, else from stdin when it is
    not a terminal, else from $EDITOR opened on the current text. The entry gets a new
    id (an id follows its text); the new one is printed.

    \b
      hive memory edit 3f9c2a7d01b4e6aa --text "CI runners have no GPU"
      echo "CI runners have no GPU" | hive memory edit 3f9c2a7d01b4e6aa
      hive memory edit 3f9c2a7d01b4e6aa          (opens $EDITOR)
    """
    caller = _caller(proof=True)
    try:
        with _store(caller.paths) as store:
            # Checked before an editor shows the text: nobody sees what they may not edit.
            entry = changeable(caller.paths, store, entry_id, caller.who)
            if text is None:
                text = read_source("-") if not sys.stdin.isatty() else click.edit(entry.text)
            elif text == "-":
                text = read_source("-")
            if text is None or text.strip() == entry.text.strip():
                _said(f"{entry_id} unchanged.", entry.id, entry.path, as_json)
                return
            changed = edit(caller.paths, entry_id, caller.who, text, store)
    except MemoryStoreError as e:
        raise HiveError(str(e)) from None
    except ValueError as e:
        raise BadUsage(str(e)) from None
    said = f"edited {entry_id}; it is now {changed.id} ({changed.path})"
    _said(said, changed.id, changed.path, as_json)


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


@memory_group.command("tidy")
@click.option("--agent", "agent_id", metavar="ID", help="Whose memory (default: yours).")
@click.option("--rule", is_flag=True, help="Fold by rule; do not ask the agent's CLI.")
@home_option
def tidy_cmd(agent_id: str | None, rule: bool) -> None:
    """Fold your notes into memory.md, keeping it within office.toml's memory_budget.

    Every change (added, updated, removed, with its reason) is appended to
    agents/<id>/memory/changes.md; what leaves memory.md goes to memory/archive.md,
    which stays searchable. A claude agent's own CLI condenses the notes (headless,
    no tools); without one, or if its answer does not check out, every note becomes
    a line of memory.md and the oldest lines move to the archive.

    \b
      hive memory tidy
      hive memory tidy --agent jim --rule          (the person)
    """
    from hive_core.memory.sources import OutsideOwner
    from hive_core.memory.tidy import summariser_for, tidy

    caller = _caller(proof=True)
    target = agent_id or caller.who
    if target == HUMAN:
        raise BadUsage("the person has no memory to tidy; name an agent with --agent ID.")
    if caller.who not in (HUMAN, target):
        raise BadUsage(f"you are {caller.who}: you can tidy only your own memory.")
    spec = agent(caller.config, target)
    if spec is None:
        raise BadUsage(f"there is no agent {target!r} in this office (`hive roster`).")
    box = caller.paths.mailbox(target)
    budget = caller.config.office.memory_budget
    summariser = None if rule else summariser_for(spec, box.memory_dir)
    try:
        with _store(caller.paths) as store:
            fold = tidy(caller.paths, target, budget=budget, summariser=summariser, store=store)
    except OutsideOwner as e:
        raise HiveError(str(e)) from None
    if fold is None:
        click.echo(f"{target}: nothing to tidy (no notes, memory.md within {budget} bytes).")
        return
    how = "by the agent's CLI" if fold.method == "cli" else "by rule"
    click.echo(
        f"{target}: {len(fold.changes)} changes {how}; memory.md "
        f"{len(fold.index.encode())}/{budget} bytes; {len(fold.archived)} pieces to "
        f"archive.md; see {box.changes}"
    )
    if fold.fallback:
        click.echo(f"the agent's CLI was not used: {fold.fallback}", err=True)
