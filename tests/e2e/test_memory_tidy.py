"""The tidy step: the rule never loses a note and keeps the budget; the agent's own CLI
(the real claude, against the scripted model) folds when its answer checks out, and the
rule takes over when it does not."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_core.agents.claude import structured_output
from hive_core.cli.group import cli
from hive_core.demo.claude_env import claude_environment, write_claude_config
from hive_core.demo.scripted_model import Scenario, ScriptedModel, ToolUse, anything, turn
from hive_core.hive import init_office
from hive_core.memory import open_store
from hive_core.memory.fold import (
    MIN_BUDGET,
    Change,
    Fold,
    Note,
    SummaryError,
    check_answer,
    fold_by_rule,
    parse_notes,
    should_tidy,
    size,
    split_blocks,
)
from hive_core.memory.sources import note_line
from hive_core.memory.tidy import summariser_for, tidy
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec
from tests.conftest import ProvingOffice

VENV_BIN = Path(sys.executable).parent
CLAUDE = shutil.which("claude", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
API_KEY = "sk-ant-scripted-0123456789abcdefghijklmnop"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TITLE = "# Memory of jim\n\n"

# What agents write: words, punctuation, code, other scripts; lines and blank lines.
note_text = st.text(
    alphabet=st.sampled_from(
        list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?'\"()[]{}<>/\\_-+*=#`~@$%&|é日\n")
    ),
    min_size=1,
    max_size=400,
).filter(lambda t: t.strip())


def flat(text: str) -> str:
    """Whitespace-insensitive form: markdown re-indents lines, it must not change words."""
    return " ".join(text.split())


def notes_file(texts: Sequence[str]) -> str:
    """notes.md as `hive memory note` writes it."""
    return "".join(
        f"\n{note_line(f'2026-11-30T09:{i // 60:02d}:{i % 60:02d}Z', t)}\n"
        for i, t in enumerate(texts)
    )


@pytest.fixture
def home(short_tmp: Path) -> Iterator[HivePaths]:
    root = short_tmp
    paths = HivePaths(root / "home")
    init_office(paths)
    yield paths


# --- pure parts ---------------------------------------------------------------------------


def test_should_tidy() -> None:
    budget = 8192
    assert not should_tidy(0, 100, idle=True, budget=budget)
    assert should_tidy(10, 100, idle=True, budget=budget)
    assert not should_tidy(10, 100, idle=False, budget=budget)
    assert should_tidy(3000, 100, idle=False, budget=budget)
    assert should_tidy(500, 100, idle=False, budget=budget, notes=21)
    assert should_tidy(0, 9000, idle=False, budget=budget)  # outgrew its budget


@given(st.lists(note_text, max_size=8))
def test_blocks_and_notes_lose_nothing(texts: list[str]) -> None:
    text = notes_file(texts)
    assert "".join(split_blocks(text)) == text
    notes = parse_notes(text)
    assert [flat(n.text) for n in notes] == [flat(t) for t in texts]
    assert all(n.at and n.at.startswith("2026-11-30T09:") for n in notes)


@settings(max_examples=300)
@given(
    st.lists(note_text, max_size=12),
    st.lists(note_text, max_size=6),
    st.integers(MIN_BUDGET, 3000),
)
def test_fold_by_rule_never_loses_a_note_and_keeps_the_budget(
    old: list[str], new: list[str], budget: int
) -> None:
    index = TITLE + "".join(f"- {flat(t)}\n" for t in old)
    notes = parse_notes(notes_file(new))
    fold = fold_by_rule(index, notes, budget)
    assert size(fold.index) <= budget
    kept = flat(fold.index + "".join(fold.archived))
    for text in [*old, *new]:
        assert flat(text) in kept
    added = [c for c in fold.changes if c.kind == "added"]
    removed = [c for c in fold.changes if c.kind == "removed"]
    assert len(added) == len(notes) and len(removed) == len(fold.archived)
    assert all(c.reason for c in fold.changes)
    if fold.archived:
        assert all("archive.md" in c.reason and str(budget) in c.reason for c in removed)
    assert not fold.index or fold.index.startswith("# Memory of jim")  # the title goes last


def test_fold_by_rule_moves_the_oldest_material_first() -> None:
    index = TITLE + "".join(f"- old fact {i} " + "x" * 40 + "\n" for i in range(6))
    notes = parse_notes(notes_file(["the newest fact"]))
    fold = fold_by_rule(index, notes, budget=MIN_BUDGET)
    assert fold.index.startswith(TITLE)
    assert "the newest fact" in fold.index
    assert [b.split(" x")[0] for b in fold.archived][:2] == ["- old fact 0", "- old fact 1"]
    assert fold.changes[0] == Change(
        "added",
        "(2026-11-30) the newest fact",
        "note of 2026-11-30T09:00:00Z folded into the index",
    )


def test_a_note_larger_than_the_budget_goes_whole_to_the_archive() -> None:
    big = "word " * 200
    fold = fold_by_rule(TITLE, parse_notes(notes_file([big])), budget=MIN_BUDGET)
    assert size(fold.index) <= MIN_BUDGET
    assert flat(big) in flat("".join(fold.archived))


def test_budget_floor() -> None:
    with pytest.raises(ValueError, match="too small"):
        fold_by_rule(TITLE, [], MIN_BUDGET - 1)


NOTES = [
    Note("n1", "parser times out on big files", "2026-11-30T09:00:00Z", "- raw 1"),
    Note("n2", "pam owns the lexer", None, "- raw 2"),
]


def test_check_answer_accepts_a_complete_answer() -> None:
    fold = check_answer(
        {
            "index": "# Memory of jim\n\n- parser: stream big files\n- lexer: pam",
            "changes": [
                {
                    "kind": "added",
                    "item": "parser: stream big files",
                    "reason": "new",
                    "notes": ["n1"],
                },
                {"kind": "added", "item": "lexer: pam", "reason": "owner", "notes": ["n2"]},
            ],
        },
        NOTES,
        budget=1024,
    )
    assert fold.method == "cli" and fold.index.endswith("lexer: pam\n")
    assert fold.archived == ("- raw 1\n", "- raw 2\n")  # the notes' own words are kept


@pytest.mark.parametrize(
    ("structured", "why"),
    [
        (
            {
                "index": "# M\n",
                "changes": [{"kind": "added", "item": "a", "reason": "r", "notes": ["n1"]}],
            },
            "n2",
        ),
        (
            {
                "index": "# M\n",
                "changes": [
                    {"kind": "added", "item": "a", "reason": "r", "notes": ["n1", "n2", "n9"]}
                ],
            },
            "n9",
        ),
        (
            {
                "index": "x" * 2000,
                "changes": [{"kind": "added", "item": "a", "reason": "r", "notes": ["n1", "n2"]}],
            },
            "budget",
        ),
        (
            {
                "index": "# M\n",
                "changes": [{"kind": "added", "item": "a", "reason": " ", "notes": ["n1", "n2"]}],
            },
            "reason",
        ),
        (
            {
                "index": "# M\n",
                "changes": [{"kind": "merged", "item": "a", "reason": "r", "notes": ["n1", "n2"]}],
            },
            "shape",
        ),
        ({"index": "  \n", "changes": []}, "empty"),
    ],
)
def test_check_answer_refuses(structured: Any, why: str) -> None:
    with pytest.raises(SummaryError, match=why):
        check_answer(structured, NOTES, budget=1024)


def test_claude_output_gives_the_structured_answer_or_says_why_not() -> None:
    structured = {"index": "# M\n", "changes": []}
    result = {"type": "result", "is_error": False, "structured_output": structured}
    assert structured_output(json.dumps(result).encode()) == structured
    with pytest.raises(ValueError, match="structured"):
        structured_output(b'{"type": "result", "result": "Sure! Here is..."}')
    with pytest.raises(ValueError, match="no JSON"):
        structured_output(b"Error: not logged in")
    with pytest.raises(ValueError, match="reported an error"):
        structured_output(b'{"type": "result", "is_error": true, "result": "no credit"}')


# --- the tidy on an office's files ----------------------------------------------------------


def write_notes(paths: HivePaths, texts: Sequence[str]) -> None:
    paths.mailbox("jim").notes.write_text(notes_file(texts))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(note_text, min_size=1, max_size=10), st.integers(MIN_BUDGET, 1500))
def test_tidy_by_rule_on_files(home: HivePaths, texts: list[str], budget: int) -> None:
    box = home.mailbox("jim")
    box.memory.write_text(TITLE)
    home.mailbox("jim").archive.unlink(missing_ok=True)
    write_notes(home, texts)
    fold = tidy(home, "jim", budget=budget, now=NOW)
    assert fold is not None and fold.method == "rule"
    index = box.memory.read_text()
    assert size(index) <= budget
    archived = (
        home.mailbox("jim").archive.read_text() if home.mailbox("jim").archive.exists() else ""
    )
    for text in texts:
        assert flat(text) in flat(index + archived)
    assert box.notes.read_text() == ""
    assert "2026-11-30T12:00:00Z" in box.changes.read_text()
    assert tidy(home, "jim", budget=budget) is None  # nothing left to do


def test_tidy_records_itemised_changes_and_keeps_moved_material_searchable(
    home: HivePaths,
) -> None:
    box = home.mailbox("jim")
    box.memory.write_text(TITLE + "- the staging db is pg-7 " + "x" * 200 + "\n")
    write_notes(home, ["the release train leaves on thursdays"])
    fold = tidy(home, "jim", budget=MIN_BUDGET, now=NOW)
    assert fold is not None
    changes = box.changes.read_text()
    assert changes.startswith("## 2026-11-30T12:00:00Z: 1 notes folded by rule; index ")
    assert "- added: (2026-11-30) the release train leaves on thursdays (note of " in changes
    assert "- removed: the staging db is pg-7" in changes
    assert "moved to archive.md" in changes
    assert "the staging db is pg-7" in home.mailbox("jim").archive.read_text()
    with open_store(home) as store:
        hits = store.search("staging db pg-7", "jim", "own")
        assert {h.entry.source for h in hits} == {"archive"}
        assert store.search("release train thursdays", "jim", "own")[0].entry.source == "memory"
        assert store.search("release train thursdays", "jim", "own")[0].entry.path.endswith(
            "jim/memory.md"
        )


def test_notes_written_during_the_tidy_stay_for_the_next(home: HivePaths) -> None:
    write_notes(home, ["first"])

    def slow_summariser(index: str, notes: Sequence[Note], budget: int) -> Fold:
        with home.mailbox("jim").notes.open("a") as f:
            f.write("\n" + note_line("2026-11-30T10:00:00Z", "written meanwhile") + "\n")
        raise SummaryError("the model was busy")

    fold = tidy(home, "jim", budget=4096, summariser=slow_summariser, now=NOW)
    assert fold is not None and fold.fallback == "the model was busy"
    assert "first" in home.mailbox("jim").memory.read_text()
    assert [n.text for n in parse_notes(home.mailbox("jim").notes.read_text())] == [
        "written meanwhile"
    ]
    assert "was not used: the model was busy" in home.mailbox("jim").changes.read_text()


def test_tidy_command(home: HivePaths) -> None:
    # Tidying memory needs the office to prove the caller.
    answering = ProvingOffice(home)
    try:
        write_notes(home, ["use make fast for the quick loop"])
        runner = CliRunner()
        env = {"HIVE_HOME": str(home.home), "HIVE_AGENT_ID": "jim"}
        done = runner.invoke(cli, ["memory", "tidy", "--rule"], env=env)
        assert done.exit_code == 0, done.output
        assert "jim: 1 changes by rule" in done.output
        assert "use make fast" in home.mailbox("jim").memory.read_text()
        again = runner.invoke(cli, ["memory", "tidy", "--rule"], env=env)
        assert "nothing to tidy" in again.output
        other = runner.invoke(cli, ["memory", "tidy", "--agent", "pam", "--rule"], env=env)
        assert other.exit_code == 2 and "only your own" in other.output
        person = runner.invoke(
            cli, ["memory", "tidy", "--agent", "pam", "--rule"], env={"HIVE_HOME": str(home.home)}
        )
        assert person.exit_code == 0, person.output
    finally:
        answering.close()


def test_tidy_command_keeps_office_tomls_memory_budget(home: HivePaths) -> None:
    """Issue 16: the budget is office.toml's, the one the agent's memory.md is cut to at
    start; the notes below fill four times it, so any other budget would show."""
    toml = home.office_toml.read_text()
    home.office_toml.write_text(toml.replace("[office]\n", "[office]\nmemory_budget = 1024\n", 1))
    texts = [f"fact {i}: " + "the build cache lives on the second disk " * 2 for i in range(40)]
    write_notes(home, texts)
    answering = ProvingOffice(home)
    try:
        done = CliRunner().invoke(
            cli, ["memory", "tidy", "--agent", "jim", "--rule"], env={"HIVE_HOME": str(home.home)}
        )
    finally:
        answering.close()
    assert done.exit_code == 0, done.output
    box = home.mailbox("jim")
    index = box.memory.read_text()
    assert size(index) <= 1024 and "/1024 bytes" in done.output
    assert "fact 39" in index  # the newest note stays; the oldest went to the archive
    archived = box.archive.read_text()
    assert all(flat(t) in flat(index + archived) for t in texts)


# --- the summariser: the real claude CLI against the scripted model ------------------------

needs_claude = pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)")


def run_claude_tidy(
    home: HivePaths, structured: dict[str, Any], budget: int
) -> tuple[Fold | None, ScriptedModel]:
    assert CLAUDE is not None
    root = home.home.parent
    config_dir = root / "claude-home"
    workdir = home.mailbox("jim").memory_dir
    write_claude_config(config_dir, API_KEY, trusted=[workdir])
    scenario = Scenario([turn(anything, ToolUse("StructuredOutput", structured))])
    with ScriptedModel(scenario) as model:
        env = claude_environment(base_url=model.base_url, api_key=API_KEY, config_dir=config_dir)
        spec = AgentSpec(id="jim", name="Jim", provider="claude", command=[CLAUDE])
        summariser = summariser_for(spec, workdir, env=env)
        fold = tidy(home, "jim", budget=budget, summariser=summariser, now=NOW)
    return fold, model


@pytest.mark.integration
@needs_claude
def test_the_agents_cli_folds_the_notes(home: HivePaths) -> None:
    box = home.mailbox("jim")
    box.memory.write_text(TITLE + "- CI: run scripts/test\n")
    write_notes(
        home, ["parser_config times out on files over 2 MB; use --stream", "pam owns the lexer"]
    )
    new_index = "# Memory of jim\n\n## Build\n- CI: run scripts/test\n- parser_config: --stream over 2 MB\n\n## People\n- pam: lexer\n"
    structured = {
        "index": new_index,
        "changes": [
            {
                "kind": "added",
                "item": "parser_config: --stream over 2 MB",
                "reason": "a workaround worth keeping",
                "notes": ["n1"],
            },
            {"kind": "added", "item": "pam: lexer", "reason": "who to ask", "notes": ["n2"]},
        ],
    }
    fold, model = run_claude_tidy(home, structured, budget=2048)

    assert fold is not None and fold.method == "cli" and fold.fallback is None
    (request,) = [
        r for r in model.requests if r.path.startswith("/v1/messages") and r.kind == "main"
    ]
    # Headless and without tools: the only tool is the one --json-schema adds.
    assert [t["name"] for t in request.body["tools"]] == ["StructuredOutput"]
    sent = json.dumps(request.body)
    assert "parser_config times out on files over 2 MB; use --stream" in sent
    assert "pam owns the lexer" in sent
    assert "at most 2048 bytes" in sent and "- CI: run scripts/test" in sent
    assert box.memory.read_text() == new_index
    changes = box.changes.read_text()
    assert "2 notes folded by the agent's CLI" in changes
    assert "- added: parser_config: --stream over 2 MB (a workaround worth keeping)" in changes
    assert "- added: pam: lexer (who to ask)" in changes
    assert "pam owns the lexer" in home.mailbox("jim").archive.read_text()  # the notes' own words
    assert box.notes.read_text() == ""


@pytest.mark.integration
@needs_claude
def test_a_bad_answer_falls_back_to_the_rule(home: HivePaths) -> None:
    box = home.mailbox("jim")
    write_notes(home, ["keep me", "and me too"])
    # Over budget and silent about n2.
    structured = {
        "index": "# Memory of jim\n\n" + "- padding\n" * 300,
        "changes": [{"kind": "added", "item": "keep me", "reason": "r", "notes": ["n1"]}],
    }
    fold, model = run_claude_tidy(home, structured, budget=1024)

    assert len(model.main_requests) == 1  # the CLI was asked, and its answer refused
    assert fold is not None and fold.method == "rule"
    assert fold.fallback is not None and "budget" in fold.fallback
    index = box.memory.read_text()
    assert "keep me" in index and "and me too" in index and "padding" not in index
    assert "The summariser's answer was not used" in box.changes.read_text()
    assert box.notes.read_text() == ""
