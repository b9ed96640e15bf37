"""Memory search: latency at 10k and 100k entries, note-to-searchable, recall. Measures;
asserts nothing.

    .venv/bin/python bench/bench_memory.py [--sizes 10000 100000] [--queries 300]
    .venv/bin/python bench/bench_memory.py --common [--sizes 100000] [--queries 300]

  - build: bulk insert of a synthetic index (20 agents' notes and memory, board, tasks,
    messages with participants), entries/s;
  - search: keyword search as one agent, scopes all and own, limit 10, wall and CPU
    p50/p99 over --queries queries of each kind: drawn from the near-duplicate set and
    the corpus itself ("mixed"), and by how common their words are (as --common); at
    the largest size, the common-word queries also beside the reference (as --common);
  - note: `note()` (append to notes.md + index) and the search that finds it, p50/p99;
  - recall@5 on tests/fixtures/near_duplicates.json (targets among 2,000 same-vocabulary
    distractors) for keyword, and semantic and hybrid when the `semantic` extra is
    installed; paraphrases (same meaning, other words) reported the same way.
  - --common: queries by how common their words are (the 20 and 100 most frequent words,
    ranks 100-1,000, rare words, pieces of words), each run alternately through the
    store's search and through the reference (bm25 over every match of the terms, as
    search did before issue 18), p50/p99 side by side, and how often the two agree on
    the top hit.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from figures import figure

from hive_core.hive import init_office
from hive_core.memory import Changes, Entry, MemoryStore, SemanticUnavailable, note, open_store
from hive_core.memory.store import (
    ARM_DEPTH,
    Mode,
    SearchScope,
    pieces,
    query_terms,
    scope_predicate,
    words_match,
)
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
    # Cumulative weights once: choices() would sum 20,000 weights on every call.
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    entries = []
    for i in range(n):
        text = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(8, 40)))
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
    p50, p99 = p50_p99(samples)
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"


def p50_p99(samples: list[float]) -> tuple[float, float]:
    """Median and 99th percentile, in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


def timed(
    store: MemoryStore, queries: list[str], scope: SearchScope
) -> tuple[list[float], list[float]]:
    """Wall and CPU time per search: on a shared machine the wall clock also counts the
    time other processes held the CPU."""
    wall, cpu = [], []
    for query in queries:
        start, used = time.perf_counter(), time.thread_time()
        store.search(query, "agent01", scope)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - used)
    return wall, cpu


def bench_size(n: int, queries: int, sizes: list[int]) -> None:
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
            mixed = fixture + [" ".join(rng.sample(w, min(4, len(w)))) for w in sample]
            kinds = {"mixed": mixed[:queries], **query_sets(1, queries)}
            walls: list[float] = []
            cpus: list[float] = []
            slowest = ("", 0.0, 0.0)
            for name, texts in kinds.items():
                for scope in ("all", "own"):
                    wall, cpu = timed(store, texts, scope)  # type: ignore[arg-type]
                    print(f"  {name:<17} {scope:<4} {percentiles(wall)}; cpu {percentiles(cpu)}")
                    walls += wall
                    cpus += cpu
                    # By CPU: a wall-clock p99 on a shared machine is mostly its neighbours.
                    if p50_p99(cpu)[1] > slowest[1]:
                        slowest = (f"{name}, scope {scope}", p50_p99(cpu)[1], p50_p99(wall)[1])
            p50, p99 = p50_p99(walls)
            cpu50, cpu99 = p50_p99(cpus)
            figure(
                f"memory keyword search, {n:,} entries, every kind of query (common and rare"
                " words, pieces of words; scopes all and own)",
                f"p50 {p50:.1f} ms, p99 {p99:.1f} ms (CPU p50 {cpu50:.1f}, p99 {cpu99:.1f} ms);"
                f" slowest kind: {slowest[0]}, CPU p99 {slowest[1]:.1f} ms (wall {slowest[2]:.1f})",
                target="p50 <= 5 ms, p99 <= 20 ms",
                ok=p50 <= 5 and p99 <= 20,
            )
            if n == max(sizes):
                # A smaller sample: the reference takes 40-75 ms a query.
                sets = query_sets(1, max(10, queries // 2))
                side_by_side(store, n, {k: sets[k] for k in COMMON_SETS})
            bench_note(paths, store, n)


def reference_search(store: MemoryStore, query: str, caller: str, scope: SearchScope) -> list[str]:
    """The search of before issue 18 over the same terms: bm25 over every match of the
    terms under 2,000 entries (of every term when all are common), unbounded. (It also had
    a trigram arm over every entry's text; pieces of words here stand for the same
    vocabulary words the store picks.)"""
    db = store._db

    def df(term: str) -> int:
        sql = "SELECT count(*) FROM (SELECT 1 FROM words WHERE words MATCH ? LIMIT 2000)"
        return int(db.execute(sql, (words_match([term]),)).fetchone()[0])

    counts = {t: df(t) for t in query_terms(query)}
    counts |= {w: df(w) for piece in pieces(counts) for w in store._containing(piece)}
    known = [t for t, n in counts.items() if n > 0]
    chosen = [t for t in known if counts[t] < 2000] or known
    if not chosen:
        return []
    sql = (
        "SELECT e.id FROM words JOIN entries e ON e.rid = words.rowid "
        f"WHERE words MATCH :match AND {scope_predicate(scope)} "
        f"ORDER BY words.rank, e.id LIMIT {ARM_DEPTH}"
    )
    params = {"caller": caller, "member": f",{caller},", "match": words_match(chosen)}
    return [r[0] for r in db.execute(sql, params)][:10]


COMMON_SETS = ("top 20 words", "top 100 words")


def query_sets(seed: int, count: int) -> dict[str, list[str]]:
    """Queries of 1-4 words by how common the words are (the corpus's Zipf ranks)."""
    words = vocabulary(random.Random(seed))
    rng = random.Random(5)

    def pick(lo: int, hi: int) -> list[str]:
        return [" ".join(rng.sample(words[lo:hi], rng.randint(1, 4))) for _ in range(count)]

    # A piece of a frequent word: unknown as a word, a substring of many.
    pieces = [w[1:-1] for w in words[:400] if len(w) >= 6 and "_" not in w]
    return {
        "top 20 words": pick(0, 20),
        "top 100 words": pick(0, 100),
        "ranks 100-1,000": pick(100, 1000),
        "rare words": pick(2000, 20000),
        "common + 1 rare": [
            " ".join(rng.sample(words[:50], 2) + rng.sample(words[3000:], 1)) for _ in range(count)
        ],
        "word pieces": [rng.choice(pieces) for _ in range(count)],
    }


def bench_common(n: int, queries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = office(Path(tmp))
        with open_store(paths) as store:
            start = time.perf_counter()
            store.apply(Changes(corpus(n), set()))
            print(f"{n:>7} entries built in {time.perf_counter() - start:.1f} s")
            side_by_side(store, n, query_sets(1, queries))
    print("target: p50 <= 5 ms, p99 <= 20 ms at 100k entries")


def side_by_side(store: MemoryStore, n: int, sets: dict[str, list[str]]) -> None:
    """Each query through the store's search and the reference, alternately, so a burst of
    load on the machine hits both alike; a table, and a figure for the common-word sets."""
    # CPU time beside wall time: on a shared machine the wall clock also counts the time
    # other processes held the CPU.
    print(
        f"  {'queries':<17} {'scope':<5} {'search wall p50/p99':>21} {'cpu p50/p99':>18}"
        f" {'reference wall':>20} {'cpu':>18}  same top hit"
    )
    common: tuple[list[float], list[float]] = ([], [])
    for name, texts in sets.items():
        for scope in ("all", "own"):
            new: tuple[list[float], list[float]] = ([], [])
            old: tuple[list[float], list[float]] = ([], [])
            same = 0
            for text in texts:
                w0, c0 = time.perf_counter(), time.thread_time()
                hits = store.search(text, "agent01", scope)  # type: ignore[arg-type]
                w1, c1 = time.perf_counter(), time.thread_time()
                ref = reference_search(store, text, "agent01", scope)  # type: ignore[arg-type]
                w2, c2 = time.perf_counter(), time.thread_time()
                new[0].append(w1 - w0)
                new[1].append(c1 - c0)
                old[0].append(w2 - w1)
                old[1].append(c2 - c1)
                same += [h.id for h in hits[:1]] == ref[:1]
            print(
                f"  {name:<17} {scope:<5} {pair(new[0]):>21} {pair(new[1]):>18}"
                f" {pair(old[0]):>20} {pair(old[1]):>18}  {same / len(texts):.0%}"
            )
            if name in COMMON_SETS:
                common[0].extend(new[0])
                common[1].extend(old[0])
    this, before = p50_p99(common[0]), p50_p99(common[1])
    figure(
        f"memory search of only common words (of the 20 / 100 most frequent), {n:,} entries,"
        " scopes all and own, beside bm25 over every match (search before issue 18), same run",
        f"p50 {this[0]:.1f} ms, p99 {this[1]:.1f} ms; before: p50 {before[0]:.1f} ms,"
        f" p99 {before[1]:.1f} ms ({len(common[0])} queries)",
        target="p50 <= 5 ms, p99 <= 20 ms (before: p99 87-93 ms)",
        ok=this[0] <= 5 and this[1] <= 20,
    )


def pair(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered) * 1000:.2f} / {p99 * 1000:.2f} ms"


def bench_note(paths: HivePaths, store: MemoryStore, n: int, runs: int = 50) -> None:
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
    print(f"  note() append + index:              {percentiles(writes)}")
    print(f"  note to searchable (note + search): {percentiles(visible)}")
    p50, p99 = p50_p99(visible)
    figure(
        f"a memory note to searchable, {n:,} entries",
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
        target="<= 100 ms",
        ok=p99 <= 100,
    )


def recall_figures() -> None:
    data = json.loads(FIXTURE.read_text())
    # The same corpus as the test that asserts the floor, so the two figures agree.
    sys.path.insert(0, str(ROOT))
    from tests.effects.test_memory_recall import DISTRACTORS, corpus_entries, distractors

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
                figure(
                    f"memory recall@5, {len(data['queries'])} near-duplicate queries, {mode}",
                    f"{near:.3f} (pieces of identifiers"
                    f" {recall(store, [q for q in data['queries'] if q['kind'] == 'identifier substring'], mode):.2f})",
                    target=">= 0.95" if mode != "semantic" else "",
                    ok=near >= 0.95 if mode != "semantic" else None,
                )
                figure(
                    f"memory recall@5, {len(data['paraphrases'])} paraphrases (honestly), {mode}",
                    f"{para:.2f}",
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
    parser.add_argument(
        "--common", action="store_true", help="latency by how common the query's words are"
    )
    args = parser.parse_args()
    if args.common:
        for n in args.sizes:
            bench_common(n, args.queries)
        return
    for n in args.sizes:
        bench_size(n, args.queries, args.sizes)
    print("recall@5 (targets among 2,000 same-vocabulary distractors):")
    recall_figures()
    print(
        "targets: keyword p50 <= 5 ms, p99 <= 20 ms at 100k; note to searchable <= 100 ms;"
        " keyword recall >= 0.95"
    )


if __name__ == "__main__":
    main()
