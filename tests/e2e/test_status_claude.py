"""The explained status with the real claude CLI against scripted Messages APIs, served
by a real `hive-office serve`: mail the Stop drain let go at its cap (one notice per
message, and `hive-office why` names it), a 429 from the API, and a stalled turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hive_core.demo.scripted_model import ApiError, Turn, api_error, turn, user_says
from hive_core.hint import office_command
from tests.claude_office import AGENTS, BIN, CLAUDE, ClaudeOffice, make_claude_office
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]


class HeadlessOffice:
    def __init__(self, office: ClaudeOffice, proc: subprocess.Popen[bytes]) -> None:
        self.office = office
        self.proc = proc

    def entry(self, agent: str) -> dict[str, Any]:
        return self.office.registry().get(agent, {})

    def why(self, agent: str) -> dict[str, Any]:
        out = self.office.run(
            "hive-office", "why", "--home", str(self.office.home), agent, "--json"
        )
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def type(self, agent: str, text: str) -> None:
        self.office.run("hive-office", "type", "--home", str(self.office.home), agent, text)

    def released_notices(self, who: str) -> list[dict[str, Any]]:
        return [m for m in self.office.inbox(who) if m["id"].endswith("-released")]


@pytest.fixture
def start_floor(short_tmp: Path) -> Iterator[Callable[..., HeadlessOffice]]:
    floors: list[HeadlessOffice] = []
    # Short paths: the office's sockets live under the home (AF_UNIX paths are <= 107 bytes).
    root = short_tmp

    def start(
        scenarios: dict[str, Sequence[Turn]], *, stop_block_cap: int = 3, stall_after_s: float = 300
    ) -> HeadlessOffice:
        office = make_claude_office(root, scenarios, stop_block_cap=stop_block_cap)
        toml = office.home / "office.toml"
        toml.write_text(
            toml.read_text().replace("[office]\n", f"[office]\nstall_after_s = {stall_after_s}\n")
        )
        proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(office.home)],
            env=office.env,
            stdout=(root / "serve.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        floor = HeadlessOffice(office, proc)
        floors.append(floor)
        wait_for(
            lambda: all(floor.entry(a).get("state") in ("idle", "idle_unread") for a in AGENTS),
            "both agents' SessionStart",
            timeout=90,
        )
        return floor

    yield start
    for floor in floors:
        if floor.proc.poll() is None:
            floor.proc.send_signal(signal.SIGTERM)
            try:
                floor.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                floor.proc.kill()
        floor.office.close()


def test_mail_released_at_the_cap_is_told_once_and_explained(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    cap = 2
    slow_feedback = [turn(user_says("Stop hook feedback"), "Noted.", delay=1.5) for _ in range(cap)]
    floor = start_floor(
        {"jim": [turn(user_says("tidy up"), "Tidied."), *slow_feedback]}, stop_block_cap=cap
    )
    office = floor.office

    def mail(subject: str) -> None:
        office.run("hive", "send", "--to", "jim", "--subject", subject, "--body", "more")

    mail("fyi 1")
    wait_for(lambda: office.inbox("jim"), "first delivery")
    floor.type("jim", "tidy up")
    for n in (2, 3):
        time.sleep(0.5)
        mail(f"fyi {n}")
    wait_for(
        lambda: any("released after 2 blocks" in e["detail"] for e in office.log("jim")),
        "the release at the cap",
        60,
    )
    ids = sorted(m["id"] for m in office.inbox("jim"))
    assert len(ids) == 3

    # The manager is told once, with the list.
    notices = wait_for(lambda: floor.released_notices("michael"), "the manager's notice", 30)
    assert len(notices) == 1
    body = notices[0]["body"]
    assert all(i in body for i in ids) and "fyi 1" in body
    assert f"`{office_command(office.home, 'why', 'jim')}`" in body
    assert notices[0]["to"] == "michael"

    # The agent shows idle with unread, and `why` names the held message and the reason.
    wait_for(lambda: floor.entry("jim").get("state") == "idle_unread", "jim idle_unread")
    why = floor.why("jim")
    assert why["kind"] == "idle_unread"
    assert f"oldest {ids[0]} from human: fyi 1" in why["why"]
    assert "at its cap after 2 blocks" in why["why"] and "The manager was told." in why["why"]
    assert "Stop released at the cap" in why["evidence"]
    text = office.run("hive-office", "why", "--home", str(office.home), "jim").stdout
    assert text.startswith("jim: idle_unread\n") and ids[0] in text and "evidence: " in text
    roster = office.run("hive", "roster").stdout
    assert "[idle_unread]" in roster and "at its cap" in roster

    # The manager's own mail released at its cap (its standup, which the scripted
    # manager never marks done) is told to the person instead.
    mine = wait_for(lambda: floor.released_notices("human"), "the person's notice", 60)
    assert mine[0]["to"] == "human" and "michael was kept working 2 times" in mine[0]["body"]

    # New mail starts a new batch: the wake path nudges, the drain blocks and releases
    # again, and the manager hears only of the new message.
    mail("fyi 4")
    wait_for(lambda: len(floor.released_notices("michael")) == 2, "a second notice", 90)
    second = max(floor.released_notices("michael"), key=lambda m: m["id"])["body"]
    assert "fyi 4" in second and not any(i in second for i in ids), second


def test_a_429_from_the_api_shows_rate_limited_until_a_turn_works(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    floor = start_floor({"jim": [api_error(user_says("summarise the repo"))]})
    floor.type("jim", "summarise the repo")
    wait_for(lambda: floor.entry("jim").get("state") == "rate_limited", "jim rate_limited", 60)
    why = floor.why("jim")
    assert why["kind"] == "rate_limited" and "rate limit" in why["why"]
    assert why["evidence"].startswith("StopFailure rate_limit at ")
    assert floor.entry("jim")["status"] == "idle"  # the turn is over; the registry agrees
    # The next turn goes through (the scripted API answers it): the limit is over.
    floor.type("jim", "try again")
    wait_for(lambda: floor.entry("jim").get("state") == "idle", "jim idle again", 60)
    assert any("turn failed: rate_limit" in e["detail"] for e in floor.office.log("jim"))


def test_a_turn_that_goes_silent_shows_stalled(start_floor: Callable[..., HeadlessOffice]) -> None:
    floor = start_floor(
        {"jim": [turn(user_says("long job"), "Done.", delay=6.0)]}, stall_after_s=1.5
    )
    floor.type("jim", "long job")
    wait_for(lambda: floor.entry("jim").get("state") == "working", "jim working", 30)
    # A hung CLI: no hook event and no output (its spinner stops too).
    pid = floor.entry("jim")["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: floor.entry("jim").get("state") == "stalled", "jim stalled", 30)
        why = floor.why("jim")
        assert why["kind"] == "stalled" and "over 1.5 s (stall_after_s)" in why["why"]
        assert "last hook UserPromptSubmit" in why["evidence"] or "last hook Pre" in why["evidence"]
    finally:
        os.kill(pid, signal.SIGCONT)
    # Alive again: it prints, finishes its turn, and is idle.
    wait_for(lambda: floor.entry("jim").get("state") == "idle", "jim idle after the turn", 60)


def test_a_cli_retrying_after_a_429_shows_rate_limited_from_what_it_prints(
    start_floor: Callable[..., HeadlessOffice],
) -> None:
    # The CLI waits out `retry-after` and says so in its pane; its retry gets an answer.
    floor = start_floor({"jim": [api_error(user_says("summarise"), ApiError(retry_after=15))]})
    floor.type("jim", "summarise")
    try:
        wait_for(lambda: floor.entry("jim").get("state") == "rate_limited", "jim rate_limited", 60)
    except AssertionError:
        # Say what the API was asked and what the office saw. (Seen twice in CI when the
        # limit was read from the bytes the CLI wrote, which lack the cells it left as
        # they were; read from the screen since.)
        asked = [(r.kind, r.turn) for r in floor.office.models["jim"].requests]
        raise AssertionError(
            f"jim never rate_limited; the API was asked (kind, turn): {asked}; registry: "
            f"{floor.entry('jim')}; why: {floor.why('jim')}; the office's log ends: "
            f"{(floor.office.root / 'serve.log').read_text()[-2000:]}"
        ) from None
    # The registry's state comes first; why reads the pane as it is drawn then, and the CLI
    # may be mid-redraw: read it until the whole line is there.
    expected = "its CLI waits to try again: API error · Retrying · attempt 1/10"
    seen: list[str] = []

    def drawn() -> bool:
        seen.append(floor.why("jim")["why"])
        return seen[-1].endswith(expected)

    try:
        wait_for(drawn, "", 30)
    except AssertionError:
        raise AssertionError(f"why never ended with {expected!r}; last: {seen[-1]!r}") from None
    assert floor.entry("jim")["status"] == "working"  # no hook says otherwise
    wait_for(lambda: floor.entry("jim").get("state") == "idle", "jim idle after the retry", 60)
