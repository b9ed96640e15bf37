"""Issue 16's memory: exact filters (tag, source, external id) with scope applied inside
the query, forget and edit with their permissions, the person's every-scope search, the
CLI and MCP for them, and the doctor's semantic line.

Every filter test seeds the entry that must come back next to another agent's private
entry that matches the same filter, so an arm that returns nothing fails as surely as
one that leaks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from hive_core.cli.doctor import run_checks
from hive_core.cli.group import cli
from hive_core.hive import init_office
from hive_core.memory import (
    Changes,
    Entry,
    Filters,
    MemoryStore,
    NotAllowed,
    NotFound,
    edit,
    embed,
    forget,
    note,
    open_store,
    promote,
)
from hive_core.memory.sources import note_line
from hive_core.memory.write import piece_lines, without_piece
from hive_core.paths import HivePaths
from hive_core.schema import Ledger, Task
from tests.conftest import ProvingOffice
from tests.e2e.test_mcp import call, refusal, session


def entry(
    key: str,
    owner: str,
    *,
    scope: str = "own",
    source: str = "note",
    tags: tuple[str, ...] = (),
    at: str = "2026-11-30T09:00:00Z",
    text: str = "the deploy runbook",
) -> Entry:
    return msgspec.convert(
        {
            "source": source,
            "external_id": key,
            "owner": owner,
            "scope": scope,
            "text": text,
            "path": f"test/{key}",
            "created_at": at,
            "updated_at": at,
            "tags": tags,
        },
        Entry,
    )


@pytest.fixture
def home(short_tmp: Path) -> Iterator[HivePaths]:
    root = short_tmp
    paths = HivePaths(root / "home")
    init_office(paths)
    yield paths


@pytest.fixture
def store(home: HivePaths) -> Iterator[MemoryStore]:
    with open_store(home) as opened:
        yield opened


def keys(store: MemoryStore, caller: str, scope: str = "all", **filters: object) -> list[str]:
    hits = store.search("", caller, scope, 50, filters=Filters(**filters))  # type: ignore[arg-type]
    return [h.entry.external_id for h in hits]


# --- structured queries --------------------------------------------------------------------


SEEDED = [
    entry("jim-old", "jim", tags=("topic:ci",), at="2026-11-01T00:00:00Z"),
    entry("jim-new", "jim", tags=("topic:ci", "flaky"), at="2026-11-20T00:00:00Z"),
    entry(
        "board-ci",
        "office",
        scope="office",
        source="board",
        tags=("topic:ci",),
        at="2026-11-10T00:00:00Z",
    ),
    entry("pam-ci", "pam", tags=("topic:ci",), at="2026-11-25T00:00:00Z"),
    entry("jim-near", "jim", tags=("topic:ci-extra", "topic:c"), at="2026-11-26T00:00:00Z"),
    entry("t-0007", "office", scope="office", source="task", tags=("status:blocked",)),
    entry("pam-task-like", "pam", tags=("status:blocked",)),
]


def test_each_filter_returns_what_it_names_in_scope_newest_first(store: MemoryStore) -> None:
    store.apply(Changes(SEEDED, set()))
    # A tag is matched whole: topic:ci-extra and topic:c are not topic:ci.
    assert keys(store, "jim", tags=("topic:ci",)) == ["jim-new", "board-ci", "jim-old"]
    assert keys(store, "jim", "own", tags=("topic:ci",)) == ["jim-new", "jim-old"]
    assert keys(store, "jim", "office", tags=("topic:ci",)) == ["board-ci"]
    assert keys(store, "pam", tags=("topic:ci",)) == ["pam-ci", "board-ci"]
    assert keys(store, "jim", tags=("topic:ci", "flaky")) == ["jim-new"]  # every tag
    assert keys(store, "jim", tags=("status:blocked",)) == ["t-0007"]
    assert keys(store, "jim", source="task") == ["t-0007"]
    assert keys(store, "jim", source="note") == ["jim-near", "jim-new", "jim-old"]
    assert keys(store, "pam", source="note") == ["pam-task-like", "pam-ci"]
    assert keys(store, "jim", external_id="jim-old") == ["jim-old"]
    assert keys(store, "jim", external_id="t-0007") == ["t-0007"]
    assert keys(store, "jim", external_id="pam-ci") == []  # another's private entry
    assert keys(store, "pam", external_id="pam-ci") == ["pam-ci"]
    assert keys(store, "jim", source="board", external_id="board-ci") == ["board-ci"]
    assert keys(store, "jim", source="task", external_id="board-ci") == []
    # The person's "all" is every scope; its "office" stays the office's.
    assert "pam-ci" in keys(store, "human", tags=("topic:ci",))
    assert keys(store, "human", "office", tags=("topic:ci",)) == ["board-ci"]
    # Filters narrow a ranked query too, inside it.
    ranked = store.search("deploy runbook", "jim", "all", 50, filters=Filters(tags=("topic:ci",)))
    assert {h.entry.external_id for h in ranked} == {"jim-new", "board-ci", "jim-old"}
    assert store.search("", "jim") == []  # neither text nor filters: nothing asked
    with pytest.raises(ValueError, match="unknown source"):
        keys(store, "jim", source="gossip")
    with pytest.raises(ValueError, match="one word"):
        keys(store, "jim", tags=("two words",))


def test_the_tag_index_follows_changes_and_removals(store: MemoryStore) -> None:
    store.upsert(entry("t-1", "office", scope="office", source="task", tags=("status:open",)))
    assert keys(store, "jim", tags=("status:open",)) == ["t-1"]
    store.upsert(entry("t-1", "office", scope="office", source="task", tags=("status:done",)))
    assert keys(store, "jim", tags=("status:open",)) == []
    assert keys(store, "jim", tags=("status:done",)) == ["t-1"]
    assert store.delete_source_file("test/t-1") == 1
    assert keys(store, "jim", tags=("status:done",)) == []


def test_a_filtered_listing_finds_a_few_entries_among_many(store: MemoryStore) -> None:
    bulk = [
        entry(
            f"bulk-{i}",
            ("pam", "pete", "michael")[i % 3],
            tags=("topic:ci",),
            at=f"2026-11-30T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        )
        for i in range(20_000)
    ]
    mine = entry("mine", "jim", tags=("topic:ci",), at="2020-01-01T00:00:00Z")
    store.apply(Changes([*bulk, mine], set()))
    # The oldest entry of the tag, behind 20,000 newer ones of others: still found.
    assert keys(store, "jim", tags=("topic:ci",)) == ["mine"]


def test_the_cli_filters_and_labels_results_by_owner(home: HivePaths) -> None:
    with open_store(home) as store:
        store.apply(Changes(SEEDED, set()))
    runner = CliRunner()
    jim = {"HIVE_HOME": str(home.home), "HIVE_AGENT_ID": "jim"}
    listed = runner.invoke(cli, ["memory", "search", "--tag", "topic:ci", "--json"], env=jim)
    assert listed.exit_code == 0, listed.output
    found = [hit["entry"]["external_id"] for hit in json.loads(listed.output)]
    assert found == ["jim-new", "board-ci", "jim-old"]
    by_source = runner.invoke(cli, ["memory", "search", "--source", "note"], env=jim)
    assert by_source.exit_code == 0, by_source.output
    assert "test/jim-new" in by_source.output and "private:jim" in by_source.output
    assert "pam" not in by_source.output
    nothing = runner.invoke(cli, ["memory", "search"], env=jim)
    assert nothing.exit_code == 2 and "--tag" in nothing.output
    person = runner.invoke(
        cli,
        ["memory", "search", "deploy", "runbook", "--scope", "all", "-n", "50"],
        env={"HIVE_HOME": str(home.home)},
    )
    assert person.exit_code == 0, person.output
    assert "private:pam" in person.output and "private:jim" in person.output
    assert "office" in person.output
    agent = runner.invoke(cli, ["memory", "search", "deploy", "runbook", "-n", "50"], env=jim)
    assert "private:jim" in agent.output and "private:pam" not in agent.output


# --- forget and edit -----------------------------------------------------------------------


def test_piece_rewriting_keeps_the_form() -> None:
    note = note_line("2026-11-30T09:00:00Z", "old words").splitlines()
    assert piece_lines(note, "new\n\nwords") == ["- 2026-11-30T09:00:00Z new", "  words"]
    assert piece_lines(["1. step one"], "step two") == ["1. step two"]
    assert piece_lines(["a paragraph"], "first\n- not an item") == ["first", "  - not an item"]
    for bad in ("", "  \n ", "ok\n# a heading"):
        with pytest.raises(ValueError):
            piece_lines(["a paragraph"], bad)
    assert without_piece(["a", "", "b", "", "c"], 2, 3) == ["a", "", "c"]


def test_forget_and_edit_of_private_memory_is_for_its_owner_only(
    home: HivePaths, store: MemoryStore
) -> None:
    first = note(home, "jim", "the staging DB is read-only on Fridays", store)
    kept = note(home, "jim", "pam owns the lexer", store)
    notes = home.mailbox("jim").notes
    before = notes.read_bytes()
    for other in ("pam", "michael", "human"):
        with pytest.raises(NotAllowed, match="private memory"):
            forget(home, first.id, other, store)
        with pytest.raises(NotAllowed, match="private memory"):
            edit(home, first.id, other, "rewritten by someone else", store)
        assert notes.read_bytes() == before, "a refusal changes nothing"
    assert [h.id for h in store.search("staging read-only", "jim", "own")] == [first.id]

    edited = edit(home, first.id, "jim", "the staging DB is writable again", store)
    assert edited.id != first.id and edited.created_at == first.created_at  # the note's time
    text = notes.read_text()
    assert "writable again" in text and "read-only" not in text and "pam owns the lexer" in text
    assert [h.id for h in store.search("staging writable", "jim", "own")] == [edited.id]
    assert store.lookup(first.id) is None

    gone = forget(home, edited.id, "jim", store)
    assert gone.id == edited.id
    assert "staging" not in notes.read_text() and "pam owns the lexer" in notes.read_text()
    assert store.search("staging", "jim", "own") == []
    assert [h.id for h in store.search("lexer", "jim", "own")] == [kept.id]
    with pytest.raises(NotFound):
        forget(home, edited.id, "jim", store)


def test_memory_md_pieces_and_repeats(home: HivePaths, store: MemoryStore) -> None:
    box = home.mailbox("jim")
    box.memory.write_text("# Memory of jim\n\n- same line\n- other\n- same line\n")
    store.reindex()
    twins = sorted(
        (h.entry for h in store.search("same line", "jim", "own")), key=lambda e: e.external_id
    )
    assert [e.external_id.rsplit("#")[1][16:] for e in twins] == ["", "-2"]
    changed = edit(home, twins[1].id, "jim", "the second one, changed", store)
    assert box.memory.read_text() == (
        "# Memory of jim\n\n- same line\n- other\n- the second one, changed\n"
    )
    assert changed.text == "the second one, changed"
    forget(home, twins[0].id, "jim", store)
    assert box.memory.read_text() == "# Memory of jim\n\n- other\n- the second one, changed\n"


def test_office_knowledge_is_for_the_manager_and_the_person(
    home: HivePaths, store: MemoryStore
) -> None:
    home.board.write_text("# Board\n\n- release on Thursday\n\n- freeze on Wednesday\n")
    store.reindex()
    [release] = store.search("release thursday", "jim", "office")
    before = home.board.read_bytes()
    for agent in ("jim", "pam"):
        with pytest.raises(NotAllowed, match="manager"):
            forget(home, release.id, agent, store)
        with pytest.raises(NotAllowed, match="manager"):
            edit(home, release.id, agent, "release on Friday", store)
    assert home.board.read_bytes() == before
    moved = edit(home, release.id, "human", "release on Friday", store)
    assert "- release on Friday" in home.board.read_text()
    forget(home, moved.id, "michael", store)
    assert home.board.read_text() == "# Board\n\n- freeze on Wednesday\n"

    private = note(home, "jim", "the vault key is in 1password", store)
    promoted = promote(home, private.id, "michael", store)
    with pytest.raises(NotAllowed):
        forget(home, promoted.id, "pam", store)
    assert (home.promoted / f"{private.id}.json").exists()
    reworded = edit(home, promoted.id, "michael", "the vault key: ask michael", store)
    assert reworded.id == promoted.id and "ask michael" in reworded.text
    forget(home, promoted.id, "human", store)
    assert not (home.promoted / f"{private.id}.json").exists()
    assert store.search("vault key", "pam") == []


def test_mail_and_tasks_are_not_forgotten(home: HivePaths, store: MemoryStore) -> None:
    ledger = Ledger(
        tasks=[
            Task(
                id="T-1",
                title="Vendor client",
                created_at="2026-11-30T09:00:00Z",
                updated_at="2026-11-30T09:00:00Z",
            )
        ]
    )
    home.tasks.write_bytes(msgspec.json.encode(ledger))
    store.reindex()
    [task] = store.search("", "michael", filters=Filters(source="task"))
    with pytest.raises(NotAllowed, match="hive task"):
        forget(home, task.id, "michael", store)
    assert store.lookup(task.id) is not None


def test_the_cli_forget_and_edit_need_the_right_caller(home: HivePaths) -> None:
    with open_store(home) as store:
        made = note(home, "jim", "the nightly build is at 02:00", store)
    notes = home.mailbox("jim").notes
    before = notes.read_bytes()
    runner = CliRunner()
    answering = ProvingOffice(home)
    try:
        pam = {"HIVE_HOME": str(home.home), "HIVE_AGENT_ID": "pam"}
        jim = {"HIVE_HOME": str(home.home), "HIVE_AGENT_ID": "jim"}
        refused = runner.invoke(cli, ["memory", "forget", made.id], env=pam)
        assert refused.exit_code == 1 and "private memory" in refused.output
        refused = runner.invoke(cli, ["memory", "edit", made.id, "--text", "x y"], env=pam)
        assert refused.exit_code == 1 and "private memory" in refused.output
        assert notes.read_bytes() == before
        done = runner.invoke(cli, ["memory", "edit", made.id], env=jim, input="at 03:00 now\n")
        assert done.exit_code == 0, done.output
        new_id = done.output.split("it is now ")[1].split()[0]
        assert "at 03:00 now" in notes.read_text() and "02:00" not in notes.read_text()
        done = runner.invoke(cli, ["memory", "forget", new_id], env=jim)
        assert done.exit_code == 0 and "forgot" in done.output, done.output
        assert "03:00" not in notes.read_text()
    finally:
        answering.close()


# --- MCP ------------------------------------------------------------------------------------


async def test_mcp_memory_query_filters_and_modes(home: HivePaths) -> None:
    with open_store(home) as store:
        store.apply(Changes(SEEDED, set()))
    async with session(home, "jim") as jim:
        tagged = await call(jim, "memory_query", tags=["topic:ci"])
        tasks = await call(jim, "memory_query", source="task", scope="office")
        one = await call(jim, "memory_query", external_id="jim-old")
        theirs = await call(jim, "memory_query", external_id="pam-ci")
        ranked = await call(jim, "memory_query", query="deploy runbook", tags=["flaky"])
        empty = await refusal(jim, "memory_query")
        bad_source = await refusal(jim, "memory_query", source="gossip")
        if embed.missing():
            semantic = await refusal(jim, "memory_query", query="deploy", mode="semantic")
            assert "scripts/setup --semantic" in semantic
        else:
            assert await call(jim, "memory_query", query="deploy", mode="hybrid")
    assert [h["external_id"] for h in tagged] == ["jim-new", "board-ci", "jim-old"]
    assert [(h["external_id"], h["tags"]) for h in tasks] == [("t-0007", ["status:blocked"])]
    assert [h["external_id"] for h in one] == ["jim-old"]
    assert theirs == []
    assert [h["external_id"] for h in ranked] == ["jim-new"]
    assert "tags" in empty
    assert "gossip" in bad_source or "source" in bad_source


async def test_mcp_forget_and_edit_act_for_the_caller_only(running: Any) -> None:
    paths: HivePaths = running.office.paths
    secret = {a: running.office.states[a].secret for a in ("jim", "pam")}
    notes = paths.mailbox("jim").notes
    async with session(paths, "jim", secret["jim"]) as jim:
        written = await call(jim, "memory_write", text="the canary deploy takes 20 minutes")
        before = notes.read_bytes()
        async with session(paths, "pam", secret["pam"]) as pam:
            refused = await refusal(pam, "memory_forget", entry_id=written["id"])
            assert "private memory" in refused
            refused = await refusal(pam, "memory_edit", entry_id=written["id"], text="x")
            assert "private memory" in refused
        assert notes.read_bytes() == before
        edited = await call(jim, "memory_edit", entry_id=written["id"], text="it takes 25")
        assert edited["id"] != written["id"] and "it takes 25" in notes.read_text()
        forgot = await call(jim, "memory_forget", entry_id=edited["id"])
        assert forgot["id"] == edited["id"] and "takes 25" not in notes.read_text()


# --- doctor ---------------------------------------------------------------------------------


def test_doctor_says_whether_semantic_search_is_ready(home: HivePaths) -> None:
    [line] = [c for c in run_checks(home) if c.what.startswith("semantic memory search:")]
    if embed.missing():
        assert line.ok, "an optional extra left out is not a problem"
        assert "not installed" in line.what and "scripts/setup --semantic" in line.fix
    else:
        assert line.ok and "ready" in line.what
