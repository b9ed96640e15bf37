"""The CI-log rewrite with the real claude CLI (issue 16): the scripted model runs
`gh run view 123 --log-failed --repo octo/app` twice through the Bash tool; the office's
PreToolUse hook turns each into `hive ci-logs view ...`, so the fake `gh` on PATH is
asked for the log once, and both tool results the model receives are the cached log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.demo.scripted_model import (
    RecordedRequest,
    bash,
    has_tool_result,
    tool_result_says,
    turn,
    user_says,
)
from tests.claude_office import CLAUDE, ClaudeOffice, make_claude_office, serving
from tests.e2e.test_ci_logs import REPO, FakeGh

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]

COMMAND = f"gh run view 123 --log-failed --repo {REPO}"


@pytest.fixture
def floor(short_tmp: Path) -> Iterator[tuple[ClaudeOffice, FakeGh]]:
    root = short_tmp
    gh = FakeGh(root / "fakebin")
    office = make_claude_office(
        root,
        {
            "jim": [
                turn(user_says("read the CI log"), bash(COMMAND)),
                turn(tool_result_says("quasarflux"), bash(COMMAND)),
                turn(has_tool_result(), "Read it."),
            ]
        },
        agents=("jim",),
    )
    # The desk is contained: its `hive ci-logs view` runs in a process the office starts
    # for it, which writes the office's CI-log cache (one download below proves it kept).
    office.env["PATH"] = f"{gh.folder}:{office.env['PATH']}"
    with serving(office, root / "serve.log"):
        yield office, gh


def tool_result_text(request: RecordedRequest) -> str:
    """The newest tool result the request carries back to the model."""
    blocks = [
        block
        for message in request.body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    return json.dumps(blocks[-1]["content"])


def test_gh_run_view_is_read_from_the_cache(floor: tuple[ClaudeOffice, FakeGh]) -> None:
    office, gh = floor
    office.run("hive-office", "type", "--home", str(office.home), "jim", "read the CI log")
    model = office.models["jim"]
    first = tool_result_text(model.wait_for(lambda r: r.turn == 1, 90))
    second = tool_result_text(model.wait_for(lambda r: r.turn == 2, 90))
    for result in (first, second):
        assert "FAILED test_timeout (quasarflux, attempt 1)" in result
    # One download: the first call fetched (metadata, log), the second only asked gh
    # for the latest attempt. A plain `gh run view --log-failed` would never ask --json.
    assert len(gh.log_calls()) == 1, gh.calls()
    assert len(gh.calls()) == 3 and all(
        "--json" in c for c in gh.calls() if c not in gh.log_calls()
    )
    assert "fetched and kept" in first and "from the cache" in second
    notes = [e.get("detail", "") for e in office.log("jim")]
    assert sum("through the CI-log cache" in n for n in notes) == 2, notes
