"""Semantic memory served by the office (issue 25): the model loaded once, in the office.

With the `semantic` extra (the tests marked `semantic`, which scripts/test runs in a venv
with it, failing if any is skipped there): the office's hits are the hits the local
path finds, its model is loaded once however many searches follow (its own count and
its log), `hive memory search --semantic` prints its answer and nothing of the model's
loading, with or without an office. Everywhere: the search runs as whoever whoami says
the caller is, a keyword search needs no model, and doctor tells semantic readiness
without importing torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hive_core.caller import CallerError, request
from hive_core.hive import init_office
from hive_core.memory import (
    Changes,
    Entry,
    Hit,
    SemanticUnavailable,
    embed,
    open_store,
    search,
    served,
)
from hive_core.office.semantic import LOADED
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, ControlRequest, MemoryQuery
from tests.conftest import Running

HIVE_BIN = Path(sys.executable).parent / "hive"
INSTALLED = not embed.missing()
# scripts/test runs the tests marked `semantic` in a venv with the extra and fails if
# any of them is skipped there.
needs_extra = pytest.mark.skipif(
    not INSTALLED, reason="the semantic extra is not installed (scripts/test's semantic job)"
)


def entry(key: str, owner: str, text: str, *, scope: str = "own", source: str = "note") -> Entry:
    at = "2026-11-30T09:00:00Z"
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
            "tags": (),
        },
        Entry,
    )


SEEDED = [
    entry("gpu", "jim", "The CI runner has no GPU, so the cuda tests are skipped there"),
    entry("router", "jim", "pytest -k router is the fast loop for routing changes"),
    entry("vault", "pam", "the staging database password lives in the vault under ops/staging"),
    entry(
        "release",
        "office",
        "Release checklist: tag the commit, build the wheel, publish the notes",
        scope="office",
        source="board",
    ),
    entry(
        "parser",
        "office",
        "The parser times out on files over ten megabytes",
        scope="office",
        source="board",
    ),
]
# Worded unlike any entry: only meaning finds the GPU note and the vault.
GRAPHICS = "graphics card missing on the build machine"
SECRET = "where is the secret for the test database kept"


@pytest.fixture
def office(short_tmp: Path) -> Iterator[Running]:
    """An office over an index seeded before it starts (its indexer then finds the index
    current and leaves the seeded entries alone)."""
    paths = HivePaths(short_tmp / "home")
    init_office(paths)
    with open_store(paths) as store:
        store.apply(Changes(SEEDED, set()))
    running = Running(paths)
    for state in running.office.states.values():
        state.new_secret()
    yield running
    running.close()


def local(paths: HivePaths, query: str, who: str, mode: str, scope: str = "all") -> list[Hit]:
    with open_store(paths) as store:
        return store.search(query, who, scope, 5, mode)  # type: ignore[arg-type]


def ranked(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.entry.external_id, h.score) for h in hits]


def loads_logged(paths: HivePaths) -> int:
    return sum(LOADED in line for line in paths.log.read_text().splitlines())


def hive(paths: HivePaths, *args: str) -> subprocess.CompletedProcess[str]:
    """`hive memory ARGS` as the person, in a process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["HIVE_HOME"] = str(paths.home)
    return subprocess.run(
        [str(HIVE_BIN), "memory", *args], env=env, capture_output=True, text=True, timeout=300
    )


# --- with the extra -----------------------------------------------------------------------


@pytest.mark.semantic
@needs_extra
def test_the_office_finds_what_the_local_path_finds_and_loads_the_model_once(
    office: Running,
) -> None:
    paths = office.office.paths
    assert served.status(paths) == served.Served(state="idle")  # nothing loaded by asking
    told: list[str] = []
    first = search(paths, GRAPHICS, HUMAN, "all", 5, "semantic", tell=told.append)
    assert told == [served.WAITING], "the first search after the start waits, saying so once"
    assert ranked(first) == ranked(local(paths, GRAPHICS, HUMAN, "semantic"))
    assert first[0].entry.external_id == "gpu"
    # Hybrid, and an agent's scope: jim never gets pam's private note.
    hybrid = search(paths, SECRET, "jim", "all", 5, "hybrid", tell=told.append)
    assert ranked(hybrid) == ranked(local(paths, SECRET, "jim", "hybrid"))
    assert "vault" not in {h.entry.external_id for h in hybrid}
    pams = search(paths, SECRET, "pam", "own", 5, "semantic", tell=told.append)
    assert pams[0].entry.external_id == "vault"
    assert told == [served.WAITING], "once loaded, searches are answered at once"
    # Three searches, one load: the office's count and its log agree.
    assert served.status(paths) == served.Served(state="ready", loads=1)
    assert loads_logged(paths) == 1


@pytest.mark.semantic
@needs_extra
def test_an_entry_written_after_the_load_is_found_by_meaning(office: Running) -> None:
    paths = office.office.paths
    search(paths, GRAPHICS, HUMAN, "all", 5, "semantic", tell=lambda _: None)
    with open_store(paths) as store:
        store.upsert(
            entry(
                "oncall", "office", "pam carries the pager for incidents this week", scope="office"
            )
        )
    # Only an entry with a vector can be found by meaning: it was embedded for this search.
    hits = search(paths, "who is on call", "jim", "office", 5, "semantic", tell=pytest.fail)
    assert hits[0].entry.external_id == "oncall"
    assert served.status(paths) == served.Served(state="ready", loads=1)


@pytest.mark.semantic
@needs_extra
def test_hive_memory_search_prints_its_answer_and_nothing_of_the_model(office: Running) -> None:
    paths = office.office.paths
    expected = ranked(local(paths, GRAPHICS, HUMAN, "semantic"))
    cold = hive(paths, "search", GRAPHICS, "--semantic", "--json", "-n", "5")
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr == f"hive: {served.WAITING}\n"
    warm = hive(paths, "search", GRAPHICS, "--semantic", "--json", "-n", "5")
    assert warm.returncode == 0 and warm.stderr == ""
    for answer in (cold, warm):
        hits = msgspec.convert(json.loads(answer.stdout), list[Hit])
        assert ranked(hits) == expected
    assert served.status(paths).loads == 1  # type: ignore[union-attr]
    # With no office, the command loads the model itself, says so once, and still
    # prints nothing of the loading.
    office.close()
    alone = hive(paths, "search", GRAPHICS, "--semantic", "--json", "-n", "5")
    assert alone.returncode == 0, alone.stderr
    assert alone.stderr == f"hive: {served.LOCAL}\n"
    assert ranked(msgspec.convert(json.loads(alone.stdout), list[Hit])) == expected
    assert loads_logged(paths) == 1


# --- everywhere ---------------------------------------------------------------------------


def test_the_search_runs_as_whoami_says_the_caller_is(office: Running) -> None:
    paths = office.office.paths
    ask = MemoryQuery(query="", mode="keyword", external_id="vault")
    # The person acting for pam (not running) reads pam's note; as jim, nothing.
    as_pam = served.decode(request(paths.control_socket, claim("pam", ask)))
    as_jim = served.decode(request(paths.control_socket, claim("jim", ask)))
    assert [h.entry.external_id for h in as_pam.hits or []] == ["vault"]
    assert as_jim.hits == []
    # A secret that is not pam's is refused before anything is read.
    forged = request(paths.control_socket, claim("pam", ask, secret="forged"))
    assert not forged.ok and "cannot prove it is pam" in (forged.error or "")
    with pytest.raises(CallerError, match=r"no agent 'bob' on the roster"):
        served.decode(request(paths.control_socket, claim("bob", ask)))
    # What the store refuses as asked comes back as the reason.
    bad = MemoryQuery(query="x", mode="keyword", tags=("two words",))
    assert "one word" in served.decode(request(paths.control_socket, claim("jim", bad))).bad
    # A keyword search through the office never loads the model.
    assert served.status(paths) == served.Served(state="idle")


def claim(who: str, query: MemoryQuery, secret: str | None = None) -> ControlRequest:
    return ControlRequest(cmd="memory", agent=who, secret=secret, memory=query)


def test_without_the_extra_semantic_search_says_how_to_install_it(office: Running) -> None:
    if INSTALLED:
        pytest.skip("the semantic extra is installed here (its job runs the tests above)")
    paths = office.office.paths
    for mode in ("semantic", "hybrid"):
        with pytest.raises(SemanticUnavailable, match=r"scripts/setup --semantic"):
            search(paths, GRAPHICS, "jim", "all", 5, mode, tell=pytest.fail)  # type: ignore[arg-type]
    # Keyword search goes on as before.
    assert search(paths, "cuda tests", "jim", "all", 5, "keyword", tell=pytest.fail)
    refused = hive(paths, "search", GRAPHICS, "--semantic")
    assert refused.returncode == 1 and "scripts/setup --semantic" in refused.stderr
    assert served.status(paths) == served.Served(state="idle")


DOCTOR = """
import sys
from pathlib import Path
from hive_core.cli.doctor import run_checks
from hive_core.paths import HivePaths
[line] = [c for c in run_checks(HivePaths(Path(sys.argv[1]))) if c.what.startswith("semantic memory")]
print(line.ok, line.what, sep="\\t")
print(sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules))
"""


def doctor(paths: HivePaths) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", DOCTOR, str(paths.home)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("HIVE_")},
    )
    assert done.returncode == 0, done.stderr
    line, imported = done.stdout.splitlines()
    assert imported == "[]", "doctor imported the model's libraries"
    return line.split("\t")[0], line.split("\t")[1]


@pytest.mark.semantic
def test_doctor_tells_semantic_readiness_without_importing_torch(office: Running) -> None:
    paths = office.office.paths
    ok, what = doctor(paths)
    if not INSTALLED:
        assert ok == "True" and "not installed" in what
        return
    assert ok == "True" and "ready" in what and "the office loads it at the first" in what
    search(paths, GRAPHICS, HUMAN, "all", 5, "semantic", tell=lambda _: None)
    ok, what = doctor(paths)
    assert ok == "True" and "loaded in the office (loads this run: 1)" in what
    office.close()
    ok, what = doctor(paths)
    assert ok == "True" and "ready" in what and "the office loads it" in what


def test_a_reply_too_large_leaves_hits_out_from_the_end() -> None:
    from hive_core.caller import REQUEST_MAX
    from hive_core.office.semantic import reply

    big = [
        Hit(id=f"{i:016x}", score=1.0 / (i + 1), entry=entry(f"k{i}", "jim", "x" * 200_000))
        for i in range(8)
    ]
    answer = reply(served.Served(state="ready", loads=1, hits=big))
    assert len(msgspec.json.encode(answer)) < REQUEST_MAX
    kept = served.decode(answer)
    assert kept.hits == big[: len(kept.hits or [])] and 0 < len(kept.hits or []) < len(big)
    assert kept.left_out == len(big) - len(kept.hits or [])
