"""Usage records and their cost: parsing (dedupe, bad lines, partial lines), sums, prices."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pygit2
import pytest

from hive_core import render
from hive_core.agents.providers import providers
from hive_core.agents.usage import (
    Tokens,
    UsageBook,
    UsageRecord,
    UsageSource,
    claude_line,
    claude_parser,
    codex_parser,
)
from hive_core.config import ConfigError, load_office
from hive_core.cost import (
    PRICES,
    LedgerHistory,
    Price,
    Span,
    by_agent,
    by_day,
    by_task,
    cost_of,
    label,
    price_of,
    price_table,
    summarize,
    task_spans,
)
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ModelPrice, Registry, RegistryEntry, Task
from hive_tui.panels.tasks import COLUMNS, task_row


def assistant(msg_id: str, ts: str, *, output: int = 10, model: str = "claude-sonnet-4-5") -> str:
    return json.dumps(
        {
            "type": "assistant",
            "timestamp": ts,
            "requestId": "req_" + msg_id,
            "uuid": "u-" + msg_id + str(output),
            "message": {
                "id": msg_id,
                "model": model,
                "role": "assistant",
                "content": [{"type": "text", "text": "hi"}],
                "usage": {
                    "input_tokens": 100,
                    "output_tokens": output,
                    "cache_creation_input_tokens": 1000,
                    "cache_read_input_tokens": 5000,
                },
            },
        }
    )


def source(*files: Path) -> UsageSource:
    return UsageSource(files=list(files), parser=claude_parser)


def test_a_claude_line_gives_its_usage_and_other_lines_none() -> None:
    record = claude_line(assistant("msg_1", "2026-12-01T07:00:00.000Z").encode())
    assert record == UsageRecord(
        key="msg_1",
        ts="2026-12-01T07:00:00.000Z",
        model="claude-sonnet-4-5",
        tokens=Tokens(input=100, output=10, cache_write=1000, cache_read=5000),
    )
    user = {"type": "user", "message": {"role": "user", "content": "hi", "usage": {}}}
    synthetic = json.loads(assistant("msg_2", "2026-12-01T07:00:00Z", model="<synthetic>"))
    for line in (json.dumps(user), json.dumps(synthetic), '{"usage": [1, 2', "not json", ""):
        assert claude_line(line.encode()) is None


def test_streamed_duplicates_count_once_and_the_last_line_wins(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    lines = [
        assistant("msg_1", "2026-12-01T07:00:00Z", output=1),
        assistant("msg_1", "2026-12-01T07:00:01Z", output=25),  # the same call, later block
        "{garbage",
        assistant("msg_2", "2026-12-01T07:00:02Z", output=7),
    ]
    transcript.write_text("\n".join(lines) + "\n")
    book = UsageBook()
    assert book.read("jim", source(transcript))
    records = sorted(book.records("jim"), key=lambda r: r.key)
    assert [(r.key, r.tokens.output) for r in records] == [("msg_1", 25), ("msg_2", 7)]
    # A second file holding a copy of a message (a resumed session) adds nothing.
    copy = tmp_path / "t.jsonl"
    copy.write_text(lines[1] + "\n")
    assert not book.read("jim", source(transcript, copy))
    assert len(book.records("jim")) == 2


def test_only_whole_lines_are_read_and_each_byte_once(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    first, second = (assistant(f"msg_{i}", "2026-12-01T07:00:00Z") for i in (1, 2))
    transcript.write_text(first + "\n" + second[:40])
    book = UsageBook()
    book.read("jim", source(transcript))
    assert [r.key for r in book.records("jim")] == ["msg_1"]
    assert not book.read("jim", source(transcript))  # nothing new: nothing read
    with transcript.open("a") as f:
        f.write(second[40:])
    assert not book.read("jim", source(transcript))  # still no newline
    with transcript.open("a") as f:
        f.write("\n")
    assert book.read("jim", source(transcript))
    assert sorted(r.key for r in book.records("jim")) == ["msg_1", "msg_2"]


def test_a_replaced_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(assistant("msg_1", "2026-12-01T07:00:00Z") + "\n")
    book = UsageBook()
    book.read("jim", source(transcript))
    replacement = tmp_path / "new.jsonl"
    replacement.write_text(assistant("msg_9", "2026-12-01T07:00:00Z") + "\n")
    os.replace(replacement, transcript)
    assert book.read("jim", source(transcript))
    assert sorted(r.key for r in book.records("jim")) == ["msg_1", "msg_9"]


def codex_lines() -> list[str]:
    def count(total: int, last_in: int, cached: int, out: int) -> str:
        usage = {"input_tokens": last_in, "cached_input_tokens": cached, "output_tokens": out}
        info = {
            "total_token_usage": {"total_tokens": total},
            "last_token_usage": {**usage, "total_tokens": last_in + out},
        }
        return json.dumps(
            {
                "timestamp": "2026-12-01T07:00:00.000Z",
                "type": "event_msg",
                "payload": {"type": "token_count", "info": info},
            }
        )

    turn = {
        "timestamp": "2026-12-01T06:59:59Z",
        "type": "turn_context",
        "payload": {"model": "gpt-5-codex"},
    }
    return [
        json.dumps(turn),
        count(1200, 1000, 800, 200),
        count(1200, 1000, 800, 200),  # repeated without a new call (a rate-limit update)
        json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": None}}),
        count(2700, 1400, 1000, 100),
    ]


def test_codex_token_counts_count_once_per_call(tmp_path: Path) -> None:
    rollout = tmp_path / "sessions" / "2026" / "12" / "01" / "rollout-1.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text("\n".join(codex_lines()) + "\n")
    book = UsageBook()
    book.read("dwight", UsageSource(files=[rollout], parser=codex_parser))
    records = book.records("dwight")
    assert [r.tokens for r in records] == [
        Tokens(input=200, output=200, cache_read=800),
        Tokens(input=400, output=100, cache_read=1000),
    ]
    assert {r.model for r in records} == {"gpt-5-codex"}


def test_providers_say_where_usage_is(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    config_dir = tmp_path / "claude"
    transcript = config_dir / "projects" / "-work-project" / "abc.jsonl"
    sidechain = config_dir / "projects" / "-work-project" / "abc" / "subagents" / "agent-1.jsonl"
    sidechain.parent.mkdir(parents=True)
    transcript.write_text("")
    sidechain.write_text("")
    (config_dir / "projects" / "-work-project" / "other.jsonl").write_text("")
    found = providers()
    env = {"CLAUDE_CONFIG_DIR": str(config_dir)}
    claude = found["claude"].usage_source(AgentSpec(id="jim", name="Jim"), paths, env, ["abc"])
    assert claude is not None and claude.files == [transcript, sidechain]
    rollout = paths.agent_settings / "codex" / "dwight" / "sessions" / "2026" / "rollout-x.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text("")
    spec = AgentSpec(id="dwight", name="Dwight", provider="codex")
    codex = found["codex"].usage_source(spec, paths, {}, [])
    assert codex is not None and codex.files == [rollout]
    shell = AgentSpec(id="kevin", name="Kevin", provider="shell")
    assert found["shell"].usage_source(shell, paths, {}, []) is None


def test_prices_by_longest_family_and_overrides() -> None:
    assert price_of("claude-sonnet-4-5-20250929", PRICES) == PRICES["claude-sonnet-4"]
    assert price_of("claude-opus-4-5-20251101", PRICES) == PRICES["claude-opus-4-5"]
    assert price_of("claude-opus-4-20250514", PRICES) == PRICES["claude-opus-4"]
    assert price_of("gpt-5-codex", PRICES) == PRICES["gpt-5-codex"]
    assert price_of("claude-scripted", PRICES) is None
    table = price_table(
        {"claude-sonnet-4": ModelPrice(input=2.0), "claude-scripted": ModelPrice(output=1.0)}
    )
    assert table["claude-sonnet-4"] == Price(
        input=2.0, output=15.0, cache_write=3.75, cache_read=0.3
    )
    assert price_of("claude-scripted-x", table) == Price(
        input=0.0, output=1.0, cache_write=0.0, cache_read=0.0
    )
    tokens = Tokens(input=1_000_000, output=2_000_000, cache_write=4_000_000, cache_read=10_000_000)
    assert cost_of(tokens, PRICES["claude-sonnet-4"]) == pytest.approx(3 + 30 + 15 + 3)


def test_sums_per_agent_and_day_count_unpriced_tokens_without_a_cost() -> None:
    def rec(key: str, ts: str, model: str, output: int) -> UsageRecord:
        return UsageRecord(key=key, ts=ts, model=model, tokens=Tokens(input=1000, output=output))

    records = {
        "jim": [
            rec("a", "2026-11-30T23:59:59Z", "claude-sonnet-4-5", 1000),
            rec("b", "2026-12-01T00:00:01Z", "claude-sonnet-4-5", 0),
        ],
        "pam": [rec("c", "2026-12-01T08:00:00Z", "mystery-1", 5)],
    }
    agents = summarize(records, by_agent, PRICES)
    assert agents["jim"].tokens == Tokens(input=2000, output=1000)
    assert agents["jim"].cost == pytest.approx((2000 * 3 + 1000 * 15) / 1e6)
    assert agents["pam"].cost == 0 and agents["pam"].unpriced == ["mystery-1"]
    assert agents["pam"].tokens.total == 1005
    days = summarize(records, by_day, PRICES)
    assert {d: s.tokens.total for d, s in days.items()} == {
        "2026-11-30": 2000,
        "2026-12-01": 2005,
    }


def task(task_id: str, assignee: str | None, status: str = "doing") -> Task:
    return msgspec.convert(
        {
            "id": task_id,
            "title": task_id,
            "assignee": assignee,
            "status": status,
            "created_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
        },
        Task,
    )


def test_task_spans_follow_assignment_and_completion() -> None:
    history = [
        ("2026-12-01T01:00:00Z", [task("t1", None, "todo")]),
        ("2026-12-01T02:00:00Z", [task("t1", "jim"), task("t2", "pam")]),
        ("2026-12-01T03:00:00Z", [task("t1", "jim"), task("t2", "jim")]),
        ("2026-12-01T04:00:00Z", [task("t1", "jim", "done"), task("t2", "jim")]),
    ]
    spans = task_spans(history)
    assert sorted(spans, key=lambda s: (s.task, s.start)) == [
        Span("t1", "jim", "2026-12-01T02:00:00Z", "2026-12-01T04:00:00Z"),
        Span("t2", "pam", "2026-12-01T02:00:00Z", "2026-12-01T03:00:00Z"),
        Span("t2", "jim", "2026-12-01T03:00:00Z", None),
    ]
    group = by_task(spans)

    def at(ts: str) -> UsageRecord:
        return UsageRecord(key=ts, ts=ts, model="m", tokens=Tokens())

    assert group("jim", at("2026-12-01T01:30:00Z")) is None  # before any task
    assert group("jim", at("2026-12-01T02:30:00.5Z")) == "t1"
    # Holding two, jim works on the one taken last.
    assert group("jim", at("2026-12-01T03:30:00Z")) == "t2"
    assert group("pam", at("2026-12-01T02:59:59.999+00:00")) == "t2"
    assert group("pam", at("2026-12-01T03:00:00Z")) is None


def test_ledger_history_reads_each_committed_version(tmp_path: Path) -> None:
    hive = tmp_path / "hive"
    repo = pygit2.init_repository(str(hive))
    tasks_file = hive / "tasks.json"
    parents: list[pygit2.Oid] = []
    for n, assignee in enumerate(("jim", "pam")):
        ledger = {"tasks": [msgspec.to_builtins(task("t1", assignee))]}
        tasks_file.write_text(json.dumps(ledger))
        repo.index.add("tasks.json")
        repo.index.write()
        when = pygit2.Signature("t", "t@example.com", 1_700_000_000 + 60 * n, 0)
        oid = repo.create_commit("HEAD", when, when, f"v{n}", repo.index.write_tree(), parents)
        parents = [oid]
    # The file as committed changed at its mtime, before the commit that holds it.
    os.utime(tasks_file, (1_700_000_050, 1_700_000_050))
    history = LedgerHistory(hive, tasks_file).read()
    assert [[t.assignee for t in tasks] for _, tasks in history] == [["jim"], ["pam"]]
    assert [when for when, _ in history] == ["2023-11-14T22:13:20Z", "2023-11-14T22:14:10Z"]
    spans = task_spans(history)
    assert [(s.agent, s.end) for s in spans] == [("jim", "2023-11-14T22:14:10Z"), ("pam", None)]
    # A change not committed yet is the last snapshot, at the file's mtime.
    kept = LedgerHistory(hive, tasks_file)
    kept.read()
    ledger = {"tasks": [msgspec.to_builtins(task("t1", "kevin"))]}
    tasks_file.write_text(json.dumps(ledger))
    os.utime(tasks_file, (1_700_000_100, 1_700_000_100))
    history = kept.read()
    assert history[-1][0] == "2023-11-14T22:15:00Z"
    assert [[t.assignee for t in tasks] for _, tasks in history] == [["jim"], ["pam"], ["kevin"]]
    # Committed later: the walk goes on from where it stopped.
    repo.index.add("tasks.json")
    when = pygit2.Signature("t", "t@example.com", 1_700_000_200, 0)
    repo.create_commit("HEAD", when, when, "v2", repo.index.write_tree(), parents)
    assert kept.read() == history
    tasks_file.write_text(json.dumps({"tasks": [msgspec.to_builtins(task("t1", None))]}))
    assignees = [[t.assignee for t in tasks] for _, tasks in kept.read()]
    assert assignees == [["jim"], ["pam"], ["kevin"], [None]]


def test_office_toml_prices_override_and_negative_ones_are_refused(tmp_path: Path) -> None:
    toml = tmp_path / "office.toml"
    base = '[office]\nmanager = "jim"\n[[agents]]\nid = "jim"\nname = "Jim"\n'
    toml.write_text(base + '[prices."claude-sonnet-4"]\ninput = 2.5\n')
    config = load_office(toml)
    assert price_table(config.prices)["claude-sonnet-4"].input == 2.5
    toml.write_text(base + '[prices."claude-sonnet-4"]\noutput = -1\n')
    with pytest.raises(ConfigError, match="must be 0 or more"):
        load_office(toml)


def test_labels_for_the_roster_titles_and_tasks() -> None:
    priced = summarize(
        {
            "jim": [
                UsageRecord(key="a", ts="", model="claude-sonnet-4", tokens=Tokens(output=28_000))
            ]
        },
        by_agent,
        PRICES,
    )["jim"]
    assert label(priced) == "$0.42"
    unknown = summarize(
        {"jim": [UsageRecord(key="a", ts="", model="x", tokens=Tokens(input=12_345))]},
        by_agent,
        PRICES,
    )["jim"]
    assert label(unknown) == "12.3k tok"
    registry = Registry(
        office="Scranton",
        manager="jim",
        agents=[
            RegistryEntry(id="jim", name="Jim", role="Engineer", provider="claude"),
            RegistryEntry(id="kevin", name="Kevin", role="Shell", provider="shell"),
        ],
    )
    lines = render.roster(registry, "human", {"jim": label(priced)}).splitlines()
    assert lines[1].split()[:5] == ["ID", "NAME", "PROVIDER", "STATUS", "COST"]
    assert "$0.42" in lines[2] and "-" in lines[3].split()
    row = task_row(task("t1", "jim"), done=set(), cost="$0.42")
    assert row[-1].plain == "$0.42" and COLUMNS[-1] == "cost"
