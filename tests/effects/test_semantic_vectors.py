"""Semantic search over the vectors a store holds in memory (issue 25).

A store reads the stored vectors from memory.db once and again only after memory.db
changed, by its own writes or another connection's (the office's indexer, a CLI): a
search after any change (an entry added, its text rewritten and embedded again by
another process, removed) ranks exactly as a store opened afresh, and a search with
nothing changed reads no stored vector. A query is embedded on one thread of torch
(a batch keeps torch's threads) and gets the vector the same text gets in a batch.

Marked `semantic`: scripts/test runs these in the venv with the extra, where none may skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from hive_core.memory import Changes, Entry, MemoryStore, embed, open_store
from hive_core.memory.store import SearchScope
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN

pytestmark = [
    pytest.mark.semantic,
    pytest.mark.skipif(
        bool(embed.missing()),
        reason="the semantic extra is not installed (scripts/test's semantic job)",
    ),
]

GPU = "the graphics card driver crashes when the laptop wakes from sleep"
BUDGET = "quarterly budget spreadsheet for the finance team, due Friday"
CAT = "the cat sleeps all afternoon on the warm windowsill"
BREAD = "a recipe for banana bread with walnuts and brown sugar"
QUERIES = [
    "display adapter fails after resume",
    "money plan for accounting",
    "baking a loaf at home",
    "a pet resting in the sun",
]
# (who, scope): the person over everything, and one agent over its own entries.
SEARCHERS: list[tuple[str, SearchScope]] = [(HUMAN, "all"), ("jim", "own")]


def entry(key: str, owner: str, text: str, scope: str = "own") -> Entry:
    at = "2026-11-30T09:00:00Z"
    return msgspec.convert(
        {
            "source": "note",
            "external_id": key,
            "owner": owner,
            "scope": scope,
            "text": text,
            "path": f"test/{key}",
            "created_at": at,
            "updated_at": at,
        },
        Entry,
    )


@pytest.fixture(scope="module")
def model() -> embed.Embedder:
    return embed.load()


@pytest.fixture
def office(office_home: HivePaths, model: embed.Embedder) -> Iterator[MemoryStore]:
    """The store that searches (as the office's semantic thread keeps one open)."""
    with open_store(office_home) as store:
        store.adopt(model)
        yield store


@pytest.fixture
def other(office_home: HivePaths, model: embed.Embedder) -> Iterator[MemoryStore]:
    """Another connection to the same memory.db (the office's indexer, a CLI)."""
    with open_store(office_home) as store:
        store.adopt(model)
        yield store


def ranked(store: MemoryStore, query: str, who: str, scope: SearchScope) -> list[str]:
    return [h.entry.external_id for h in store.search(query, who, scope, 10, "semantic")]


def as_fresh(paths: HivePaths, model: embed.Embedder, office: MemoryStore) -> None:
    """Every query, as every searcher, ranks in `office` as in a store opened now."""
    with open_store(paths) as fresh:
        fresh.adopt(model)
        for who, scope in SEARCHERS:
            for query in QUERIES:
                expected = ranked(fresh, query, who, scope)
                assert ranked(office, query, who, scope) == expected, (query, who)


def test_after_every_change_a_search_ranks_as_a_fresh_store(
    office_home: HivePaths, model: embed.Embedder, office: MemoryStore, other: MemoryStore
) -> None:
    office.apply(
        Changes(
            [
                entry("gpu", "jim", GPU),
                entry("budget", "office", BUDGET, "office"),
                entry("cat", "pam", CAT),
            ],
            set(),
        )
    )
    assert ranked(office, QUERIES[0], HUMAN, "all")[0] == "gpu"
    as_fresh(office_home, model, office)

    # Another process rewrites an entry and embeds it again: same row, a new vector.
    other.apply(Changes([entry("gpu", "jim", BREAD)], set()))
    assert other.embed_pending() == 0
    assert ranked(office, "baking a loaf at home", "jim", "own")[0] == "gpu"
    assert ranked(office, QUERIES[0], HUMAN, "all")[0] != "gpu"
    as_fresh(office_home, model, office)

    # Another process adds an entry (no vector yet) and removes one.
    other.apply(Changes([entry("gpu2", "jim", GPU)], set()))
    other.delete_source_file(office_home.hive / "test" / "cat")
    assert ranked(office, QUERIES[0], "jim", "own")[0] == "gpu2"
    assert "cat" not in ranked(office, QUERIES[3], HUMAN, "all")
    as_fresh(office_home, model, office)

    # The searching store's own write.
    office.apply(Changes([entry("gpu2", "jim", CAT)], set()))
    assert ranked(office, QUERIES[3], "jim", "own")[0] == "gpu2"
    as_fresh(office_home, model, office)


def test_a_search_with_nothing_changed_reads_no_stored_vector(
    office: MemoryStore, other: MemoryStore
) -> None:
    office.apply(Changes([entry("gpu", "jim", GPU), entry("cat", "jim", CAT)], set()))
    statements: list[str] = []
    office._db.set_trace_callback(statements.append)

    def reads_vectors() -> bool:
        read = any("FROM vectors" in s for s in statements)
        statements.clear()
        return read

    assert ranked(office, QUERIES[0], "jim", "own")[0] == "gpu"
    assert reads_vectors()  # the first search reads them
    assert ranked(office, QUERIES[3], "jim", "own")[0] == "cat"
    assert not reads_vectors()  # nothing changed since: none read
    # Any commit by another connection may have dropped a vector: read again.
    other.apply(Changes([entry("budget", "office", BUDGET, "office")], set()))
    assert ranked(office, QUERIES[1], HUMAN, "all")[0] == "budget"
    assert reads_vectors()
    assert ranked(office, QUERIES[1], HUMAN, "all")[0] == "budget"
    assert not reads_vectors()


def test_a_query_is_embedded_on_one_thread_as_a_batch_embeds_it(
    model: embed.Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    import torch

    threads = torch.get_num_threads()
    seen: list[int] = []
    inner: Any = model._model  # type: ignore[attr-defined]
    encode = inner.encode

    def spied(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.get_num_threads())
        return encode(*args, **kwargs)

    monkeypatch.setattr(inner, "encode", spied)
    (alone,) = model.embed([QUERIES[0]])
    batch = model.embed([QUERIES[0], QUERIES[1]])
    assert seen == [embed.QUERY_THREADS, threads]
    assert torch.get_num_threads() == threads  # torch's own setting is left as it was
    vector = np.frombuffer(alone, dtype="<f4")
    assert np.allclose(vector, np.frombuffer(batch[0], dtype="<f4"), atol=1e-5)
