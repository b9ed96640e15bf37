"""Cost with the real claude CLI: a real `hive-office serve` runs claude agents against
scripted Messages APIs, and the office's token sums per agent equal the usage those
APIs reported in their answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hive_core.agents.usage import Tokens
from hive_core.cost import PRICES, cost_of, price_of
from hive_core.demo.scripted_model import ScriptedModel, bash, has_tool_result, turn, user_says
from hive_core.demo.scripted_model.anthropic import Usage, build_message
from tests.claude_office import AGENTS, CLAUDE, ClaudeOffice, make_claude_office, serving
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]


def reported(model: ScriptedModel, requests: list[Any]) -> dict[str, int]:
    """The usage the scripted API put in its answers to the conversation's requests
    (those with tools: the CLI's side requests, such as a title, are not transcribed)."""
    sums = {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0}
    for usage, _model in answers(model, requests):
        sums["input"] += usage.input_tokens
        sums["output"] += usage.output_tokens
        sums["cache_write"] += usage.cache_creation_input_tokens
        sums["cache_read"] += usage.cache_read_input_tokens
    return sums


def answers(model: ScriptedModel, requests: list[Any]) -> list[tuple[Usage, str]]:
    # The usage the server reports depends on the request only, not on the turn.
    return [
        (build_message(model.scenario.fallback, r.body).usage, r.body["model"]) for r in requests
    ]


def snapshot(office: ClaudeOffice) -> dict[str, list[Any]]:
    """Each agent's requests so far. Taken before reading what the office summed: the
    manager goes on answering the office's notices at its own pace, so a request that
    comes in between makes the two differ and the caller reads both again."""
    return {a: list(office.models[a].main_requests) for a in AGENTS}


def list_price_cost(model: ScriptedModel, requests: list[Any]) -> float:
    total = 0.0
    for usage, name in answers(model, requests):
        price = price_of(name, PRICES)
        assert price is not None, f"the CLI asked for {name}, which has no list price"
        tokens = Tokens(
            input=usage.input_tokens,
            output=usage.output_tokens,
            cache_write=usage.cache_creation_input_tokens,
            cache_read=usage.cache_read_input_tokens,
        )
        total += cost_of(tokens, price)
    return total


def roster_usage(office: ClaudeOffice) -> dict[str, Any]:
    result = office.run("hive", "roster", "--json", "--home", str(office.home))
    return {a["id"]: a.get("usage") for a in json.loads(result.stdout)["agents"]}


def test_token_sums_equal_the_usage_the_api_reported(short_tmp: Path) -> None:
    root = short_tmp
    # Two content blocks in one message: the CLI writes a transcript line for each.
    jim = [
        turn(user_says("hello office"), "Looking at the team.", bash("hive roster")),
        turn(has_tool_result(), "Hello, team!"),
    ]
    office = make_claude_office(root, {"jim": jim})
    with serving(office, root / "serve.log"):
        # Jim holds a task from before his first request: all his usage is the task's.
        office.run(
            "hive", "task", "add", "Say hello", "--assignee", "jim", "--home", str(office.home)
        )
        office.run("hive-office", "type", "--home", str(office.home), "jim", "hello office")
        wait_for(lambda: office.models["jim"].scenario.done, "jim's scripted turn", timeout=60)
        wait_for(lambda: office.registry()["jim"]["status"] == "idle", "jim idle", timeout=60)
        for agent in AGENTS:
            assert office.models[agent].main_requests, f"{agent} made no request"

        def settled() -> tuple[dict[str, list[Any]], dict[str, Any]] | None:
            sent = snapshot(office)
            usage = roster_usage(office)
            same = all(
                usage.get(a) and usage[a]["tokens"] == reported(office.models[a], sent[a])
                for a in AGENTS
            )
            return (sent, usage) if same else None

        sent, usage = wait_for(settled, "the roster's sums to match the API's usage", 60)
        for agent in AGENTS:
            want = list_price_cost(office.models[agent], sent[agent])
            assert usage[agent]["cost"] == pytest.approx(want)
            assert usage[agent]["unpriced"] == []

        def cost_rows(*by: str) -> tuple[dict[str, list[Any]], dict[str, Any]]:
            sent = snapshot(office)
            result = office.run("hive-office", "cost", "--home", str(office.home), *by, "--json")
            return sent, json.loads(result.stdout)["rows"]

        def per_agent() -> bool:
            sent, rows = cost_rows()
            return {a: rows[a]["tokens"] for a in AGENTS} == {
                a: reported(office.models[a], sent[a]) for a in AGENTS
            }

        wait_for(per_agent, "hive-office cost to match the API's usage per agent", 60)

        def per_task() -> bool:
            sent, rows = cost_rows("--by", "task")
            jim = reported(office.models["jim"], sent["jim"])
            return {t: row["tokens"] for t, row in rows.items()} == {"t1": jim}

        wait_for(per_task, "hive-office cost --by task to put jim's usage on t1", 60)
        text = office.run("hive-office", "cost", "--home", str(office.home), "--by", "day").stdout
        assert "total" in text and "No price for" not in text, text
        # The sums held although the transcript repeats a message (one line per block).
        ids = [
            line["message"]["id"]
            for path in (root / "claude" / "projects").glob("*/*.jsonl")
            for line in map(json.loads, path.read_text().splitlines())
            if line.get("type") == "assistant"
        ]
        assert len(ids) > len(set(ids)), ids
