"""Memory search: latency at 10k and 100k entries, note-to-searchable, recall. Measures;
asserts nothing.

    .venv/bin/python bench/bench_memory.py [--sizes 10000 100000] [--queries 300]

  - build: bulk insert of a synthetic index (20 agents' notes and memory, board, tasks,
    messages with participants), entries/s;
  - search: keyword search as one agent, scope all, limit 10, p50/p99 over --queries
    queries drawn from the near-duplicate set and from the corpus itself;
  - note: `note()` (append to notes.md + index) and the search that finds it, p50/p99;
  - recall@5 on tests/fixtures/near_duplicates.json (targets among 2,000 same-vocabulary
    distractors) for keyword, and semantic and hybrid when the `semantic` extra is
    installed; paraphrases (same meaning, other words) reported the same way.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hive_core.hive import init_office
from hive_core.memory import Changes, Entry, MemoryStore, SemanticUnavailable, note, open_store
from hive_core.memory.store import Mode, SearchScope
from hive_core.paths import HivePaths

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "near_duplicates.json"
AGENTS = [f"agent{i:02d}" for i in range(20)]
STAMP = "2026-11-30T09:00:00Z"
ROSTER = "[office]\nmanager = 'agent00'\n" + "".join(
    f"[[agents]]\nid = '{a}'\nname = '{a}'\n" for a in AGENTS
)


def office(root: Path) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(ROSTER)
    init_office(paths)
    return paths


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    """Plain words and identifiers, as a team's notes mix them."""
    syllables = ["ka", "lo", "mi", "ter", "on", "ri", "sta", "ple", "dex", "vor", "un", "qua"]
    words: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choices(syllables, k=rng.randint(1, 4)))
        if rng.random() < 0.1:
            word += "_" + "".join(rng.choices(syllables, k=2))
        words.add(word)
    return sorted(words)


def corpus(n: int, seed: int = 1) -> list[Entry]:
    """n entries; word frequencies follow Zipf's law, like real text."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    entries = []
    for i in range(n):
        text = " ".join(rng.choices(words, weights, k=rng.randint(8, 40)))
        owner = rng.choice(AGENTS)
        kind = rng.random()
        parts: tuple[str, ...]
        if kind < 0.5:
            source, scope, who, parts = "note", "own", owner, ()
        elif kind < 0.8:
            source, scope, who, parts = "message", "office", owner, (owner,)
        else:
            source, scope, who, parts = "task", "office", "office", ()
        entries.append(
            Entry(
                source=source,  # type: ignore[arg-type]
                external_id=f"bench-{i}",
                owner=who,
                scope=scope,  # type: ignore[arg-type]
                text=text,
                path=f"bench/{i % 1000}",
                created_at=STAMP,
                updated_at=STAMP,
                participants=parts,
            )
        )
    return entries


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms"


def latencies(store: MemoryStore, queries: list[str], scope: SearchScope) -> list[float]:
    samples = []
    for query in queries:
        start = time.perf_counter()
        store.search(query, "agent01", scope)
        samples.append(time.perf_counter() - start)
    return samples


def bench_size(n: int, queries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = office(Path(tmp))
        entries = corpus(n)
        with open_store(paths) as store:
            start = time.perf_counter()
            store.apply(Changes(entries, set()))
            took = time.perf_counter() - start
            print(f"{n:>7} entries: built in {took:.1f} s ({n / took:,.0f} entries/s)")
            rng = random.Random(2)
            fixture = [q["query"] for q in json.loads(FIXTURE.read_text())["queries"]]
            sample = [rng.choice(entries).text.split() for _ in range(queries)]
            texts = fixture + [" ".join(rng.sample(w, min(4, len(w)))) for w in sample]
            texts = texts[:queries]
            every = latencies(store, texts, "all")
            print(f"         keyword search (scope all, limit 10): {percentiles(every)}")
            own = latencies(store, texts, "own")
            print(f"         keyword search (scope own):           {percentiles(own)}")
            bench_note(paths, store)


def bench_note(paths: HivePaths, store: MemoryStore, runs: int = 50) -> None:
    writes, visible = [], []
    for i in range(runs):
        marker = f"zebracode{i:04d}"
        start = time.perf_counter()
        note(paths, "agent01", f"remember {marker} for the release", store)
        writes.append(time.perf_counter() - start)
        hits = store.search(marker, "agent01", "own")
        visible.append(time.perf_counter() - start)
        if not hits:
            print(f"         note {marker} was NOT found right after note()")
    print(f"         note() append + index:                {percentiles(writes)}")
    print(f"         note to searchable (note + search):   {percentiles(visible)}")


def recall_figures() -> None:
    data = json.loads(FIXTURE.read_text())
    # The same corpus as the test that asserts the floor, so the two figures agree.
    sys.path.insert(0, str(ROOT))
    from tests.test_memory_recall import DISTRACTORS, corpus_entries, distractors

    noise = distractors([d["text"] for d in data["documents"]], DISTRACTORS)
    with tempfile.TemporaryDirectory() as tmp:
        paths = office(Path(tmp))
        with open_store(paths) as store:
            store.apply(Changes(corpus_entries(data["documents"], noise), set()))
            modes: list[Mode] = ["keyword", "semantic", "hybrid"]
            for mode in modes:
                try:
                    recall(store, data["queries"][:1], mode)  # load the model, embed the corpus
                    start = time.perf_counter()
                    near = recall(store, data["queries"], mode)
                    per_query = (time.perf_counter() - start) / len(data["queries"])
                    para = recall(store, data["paraphrases"], mode)
                except SemanticUnavailable as e:
                    print(f"  {mode:<8} not measured: {e}")
                    continue
                kinds = sorted({q["kind"] for q in data["queries"]})
                by_kind = ", ".join(
                    f"{k} {recall(store, [q for q in data['queries'] if q['kind'] == k], mode):.2f}"
                    for k in kinds
                )
                print(
                    f"  {mode:<8} recall@5 near-duplicates {near:.3f} ({len(data['queries'])}"
                    f" queries: {by_kind}); paraphrases {para:.2f} ({len(data['paraphrases'])});"
                    f" {per_query * 1000:.1f} ms/query over {store.count()} entries"
                )


def recall(store: MemoryStore, queries: list[dict[str, str]], mode: Mode) -> float:
    found = 0
    for q in queries:
        hits = store.search(q["query"], "agent01", "office", 5, mode)
        found += any(h.entry.external_id == q["target"] for h in hits)
    return found / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    for n in args.sizes:
        bench_size(n, args.queries)
    print("recall@5 (targets among 2,000 same-vocabulary distractors):")
    recall_figures()
    print(
        "targets: keyword p50 <= 10 ms at 100k; note to searchable <= 100 ms; keyword recall >= 0.95"
    )


if __name__ == "__main__":
    main()
