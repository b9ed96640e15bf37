"""Semantic memory search served by the office (issue 25). Measures; asserts nothing.

    .venv-semantic/bin/python bench/bench_semantic.py [--entries 10000] [--queries 60]

Needs a venv with the `semantic` extra (scripts/setup --venv .venv-semantic --semantic);
the office is that venv's `hive-office serve --no-agents`, in a home in /tmp whose index
holds --entries synthetic entries (bench_memory's corpus: 20 agents' notes, mail, tasks).

  - first search on a fresh index: the office's first semantic search after its start,
    timed by its caller from the request to the hits: the model's load plus embedding
    every entry (once per index: vectors are kept in memory.db);
  - first search after a restart: the same with the vectors already stored (the model's
    load alone): what a person waits for after starting the office;
  - warm: --queries semantic and hybrid searches through the office (the control
    request the CLI, MCP and the app send), as the person (every entry in scope) and as
    one agent (its own scope), p50/p99 wall;
  - the command: `hive memory search --semantic` end to end, warm, p50, beside the same
    command in keyword mode (a `hive` process is a whole interpreter either way).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_memory import corpus, office, p50_p99
from figures import figure

from hive_core.memory import Changes, embed, open_store, search
from hive_core.memory.store import Mode, SearchScope
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN

BIN = Path(sys.executable).parent
TARGET_MS = 150.0


@contextmanager
def serving(paths: HivePaths) -> Iterator[None]:
    """`hive-office serve --no-agents` of this venv on `paths`, until the block ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    out = paths.home.parent / "serve.out"
    with out.open("ab") as log:
        proc = subprocess.Popen(
            [BIN / "hive-office", "serve", "--home", str(paths.home), "--no-agents"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not paths.control_socket.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the office did not start: {out.read_text()}")
                time.sleep(0.05)
            yield
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)


def first(paths: HivePaths, query: str) -> float:
    start = time.perf_counter()
    hits = search(paths, query, HUMAN, "all", 10, "semantic", tell=lambda _line: None)
    took = time.perf_counter() - start
    assert hits, "the first search found nothing"
    return took


def warm(
    paths: HivePaths, queries: list[str], who: str, scope: SearchScope, mode: Mode
) -> list[float]:
    took = []
    for query in queries:
        start = time.perf_counter()
        search(paths, query, who, scope, 10, mode, tell=_unexpected)
        took.append(time.perf_counter() - start)
    return took


def _unexpected(line: str) -> None:
    raise SystemExit(f"a warm search was told: {line}")


def command(paths: HivePaths, queries: list[str], mode: str) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["HIVE_HOME"] = str(paths.home)
    took = []
    for query in queries:
        start = time.perf_counter()
        done = subprocess.run(
            [BIN / "hive", "memory", "search", query, "--mode", mode],
            env=env,
            capture_output=True,
            text=True,
        )
        took.append(time.perf_counter() - start)
        if done.returncode != 0 or done.stderr:
            sys.exit(f"hive memory search --mode {mode}: {done.returncode} {done.stderr}")
    return took


def ms(samples: list[float]) -> str:
    p50, p99 = p50_p99(samples)
    return f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    if embed.missing():
        sys.exit(f"the semantic extra is not installed in {sys.prefix}: {embed.INSTALL_HINT}")
    entries = corpus(args.entries)
    rng = random.Random(7)
    # Queries made of the corpus's own words, as agents search their notes.
    queries = [" ".join(rng.choice(entries).text.split()[:6]) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory(prefix="hb-sem-", dir="/tmp") as root:
        paths = office(Path(root))
        with open_store(paths) as store:
            start = time.perf_counter()
            store.apply(Changes(entries, set()))
            print(f"index: {store.count()} entries in {time.perf_counter() - start:.1f} s")
        with serving(paths):
            fresh = first(paths, queries[0])
        with serving(paths):
            restarted = first(paths, queries[1])
            person = {m: warm(paths, queries, HUMAN, "all", m) for m in ("semantic", "hybrid")}
            agent = warm(paths, queries, "agent01", "own", "semantic")
            few = queries[: max(5, args.queries // 6)]
            # Alternating pairs: the machine's load weighs on both alike.
            semantic_cmd: list[float] = []
            keyword_cmd: list[float] = []
            for query in few:
                semantic_cmd += command(paths, [query], "semantic")
                keyword_cmd += command(paths, [query], "keyword")
        log = (paths.home.parent / "serve.out").read_text()
        loads = log.count("loaded the semantic model")
    n = f"{args.entries:,}"
    print(f"office log: {loads} model loads over 2 starts")
    print(f"first search, fresh index: {fresh:.1f} s; after a restart: {restarted:.1f} s")
    for mode, samples in person.items():
        print(f"warm {mode}, the person, scope all: {ms(samples)}")
    print(f"warm semantic, agent01, scope own: {ms(agent)}")
    print(f"`hive memory search --semantic`: {ms(semantic_cmd)}; --mode keyword: {ms(keyword_cmd)}")
    p50 = p50_p99(person["semantic"])[0]
    figure(
        f"semantic memory search through the office, warm, {n} entries, p50",
        f"{ms(person['semantic'])} (hybrid {ms(person['hybrid'])}; one agent's own {ms(agent)})",
        target=f"<= {TARGET_MS:.0f} ms",
        ok=p50 <= TARGET_MS,
    )
    figure(
        "first semantic search after the office starts (the model's load)",
        f"{restarted:.1f} s; on a fresh index of {n} entries, embedding them too: {fresh:.1f} s",
    )
    figure(
        "`hive memory search --semantic`, the office running, warm, p50",
        f"{statistics.median(semantic_cmd) * 1000:.0f} ms (--mode keyword "
        f"{statistics.median(keyword_cmd) * 1000:.0f} ms; was 7.3-11 s, the model loaded "
        "by every call)",
    )


if __name__ == "__main__":
    main()
