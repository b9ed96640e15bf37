"""The explained status (hive_core/status.py): each state and each reason from recorded
signal sequences, and a property: every state anyone can reach has a reason."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_core import control
from hive_core.agents.claude import ClaudeProvider
from hive_core.agents.provider import CanonicalEvent, HookDecision
from hive_core.events.policy import AgentView, OfficeFacts, decide
from hive_core.render import why_text
from hive_core.schema import ControlRequest, MailItem, StatusKind
from hive_core.status import (
    LIMIT_ERRORS,
    AgentStatus,
    Failure,
    Signals,
    WakeSeen,
    clock,
    explain,
    limit_texts,
    new_limit_text,
    sign_in_drawn,
)
from hive_core.team.wake import MAX_SENDS, PRINTING, WakeMemory, WakeView, Watchdog, wake_seen
from hive_core.terminal.emulator import GhosttyEmulator
from tests.conftest import Running

T0 = 1_780_000_000.0  # a fixed wall-clock start for every sequence
KINDS = set(typing.get_args(StatusKind))


def running(**changes: object) -> Signals:
    """A claude agent whose CLI started at T0 and reported its session at T0 + 1."""
    base = Signals(
        id="jim",
        status="idle",
        alive=True,
        pid=4242,
        started_at=T0,
        event="SessionStart",
        event_at=T0 + 1,
        output_at=T0 + 1,
    )
    return msgspec.structs.replace(base, **changes)


def replay(steps: list[tuple[float, dict[str, object]]]) -> list[AgentStatus]:
    """Apply each step's signal changes at T0 + its time; what the office shows after each."""
    signals = running()
    shown = []
    for at, changes in steps:
        signals = msgspec.structs.replace(signals, **changes)
        shown.append(explain(signals, T0 + at))
    return shown


# --- a turn, start to end ---------------------------------------------------------------


def test_a_turn_is_idle_working_idle_with_the_hook_as_evidence() -> None:
    shown = replay(
        [
            (2, {}),
            (5, {"status": "working", "event": "UserPromptSubmit", "event_at": T0 + 5}),
            (6, {"event": "PreToolUse", "event_at": T0 + 6, "tool": "Bash: make"}),
            (9, {"status": "idle", "event": "Stop", "event_at": T0 + 9}),
        ]
    )
    assert [s.kind for s in shown] == ["idle", "working", "working", "idle"]
    assert shown[0].why == "At its prompt with nothing unread."
    assert shown[2].why == "In a turn (Bash: make)." and clock(T0 + 6) in shown[2].evidence
    assert shown[3].evidence == f"last hook Stop at {clock(T0 + 9)}"


def test_working_without_hooks_or_output_past_the_threshold_is_stalled() -> None:
    turn = {"status": "working", "event": "PreToolUse", "event_at": T0 + 10, "output_at": T0 + 12}
    shown = replay(
        [
            (12, turn),
            (12 + 299, {}),  # just under stall_after_s since the last output
            (12 + 300, {}),
            (12 + 301, {"output_at": T0 + 312}),  # it printed: alive after all
        ]
    )
    assert [s.kind for s in shown] == ["working", "working", "stalled", "working"]
    assert "over 300 s (stall_after_s)" in shown[2].why
    assert clock(T0 + 10) in shown[2].evidence and clock(T0 + 12) in shown[2].evidence
    # The threshold is the office's setting.
    quick = running(**turn, stall_after_s=2.0)  # type: ignore[arg-type]
    assert explain(quick, T0 + 14).kind == "stalled"
    assert "over 2 s" in explain(quick, T0 + 14).why


def test_a_permission_prompt_and_a_question_in_the_pane_are_waiting() -> None:
    prompt = explain(
        running(
            status="waiting",
            event="Notification",
            event_at=T0 + 3,
            prompt="Claude needs your permission to use Bash",
        ),
        T0 + 4,
    )
    assert prompt.kind == "waiting"
    assert "permission prompt is open in its pane: Claude needs your permission" in prompt.why
    assert prompt.evidence == f"Notification permission_prompt at {clock(T0 + 3)}"
    asked = explain(
        running(status="working", event="PreToolUse", tool="AskUserQuestion", event_at=T0 + 3),
        T0 + 4,
    )
    assert asked.kind == "waiting" and "asked the person a question" in asked.why
    # Any other tool is work.
    other = running(status="working", event="PreToolUse", tool="Bash: ls", event_at=T0 + 3)
    assert explain(other, T0 + 4).kind == "working"


# --- limits -----------------------------------------------------------------------------


def test_a_rate_limit_failure_shows_until_the_next_turn_starts() -> None:
    failure = Failure(error="rate_limit", text="API Error: 429 rate limited", at=T0 + 7)
    shown = replay(
        [
            (5, {"status": "working", "event": "UserPromptSubmit", "event_at": T0 + 5}),
            (7, {"status": "idle", "event": "StopFailure", "event_at": T0 + 7, "failure": failure}),
            (60, {}),
            (61, {"status": "working", "event": "UserPromptSubmit", "failure": None}),
        ]
    )
    assert [s.kind for s in shown] == ["working", "rate_limited", "rate_limited", "working"]
    assert "the API's rate limit: API Error: 429 rate limited" in shown[1].why
    assert shown[1].evidence == f"StopFailure rate_limit at {clock(T0 + 7)}"
    for error, words in LIMIT_ERRORS.items():
        limited = explain(running(failure=Failure(error=error, text="", at=T0)), T0)
        assert limited.kind == "rate_limited" and words in limited.why


def test_a_failure_that_waiting_will_not_cure_is_idle_with_the_failure_said() -> None:
    failure = Failure(error="authentication_failed", text="Invalid API key", at=T0 + 7)
    shown = explain(running(failure=failure), T0 + 8)
    assert shown.kind == "idle"
    assert "Its last turn failed (authentication_failed): Invalid API key" in shown.why


def test_a_sign_in_drawn_after_the_session_started_waits_for_the_person() -> None:
    # Gemini 0.61 reports SessionStart, then draws its sign-in (Ink: a styled run each).
    dialog = b"\x1b[1m How would you like to authenticate for this project?\x1b[22m\r\n"
    assert sign_in_drawn(b"\x1b[2K" + dialog) is True
    shown = explain(running(sign_in=True, output_at=T0 + 3), T0 + 4)
    assert shown.kind == "waiting" and "sign-in in its pane" in shown.why, shown
    assert "give the desk a key" in shown.why
    # Answered: the input line is drawn after it, and the desk is at its prompt again.
    answered = dialog + b"\x1b[2m > Type your message or @path/to/file\x1b[0m"
    assert sign_in_drawn(answered) is False
    assert explain(running(sign_in=False), T0 + 4).kind == "idle"
    # Output that draws neither leaves what was last seen as it is.
    assert sign_in_drawn(b"\x1b[?25l\x1b[1G") is None


def test_a_limit_report_on_screen_is_rate_limited() -> None:
    screen = [
        "❯ summarise",
        "",
        '  ⎿  API Error (429 {"type":"error"}) · Retrying in 8 seconds… (attempt 2/10)',
    ]
    [text] = limit_texts(screen)
    assert text.startswith("API Error (429") and text.endswith("(attempt 2/10")
    shown = explain(running(status="working", limit_text=text, output_at=T0 + 20), T0 + 21)
    assert (
        shown.kind == "rate_limited" and "its CLI waits to try again: API Error (429" in shown.why
    )
    # Claude Code 2.1's line under its spinner; the countdown is left out, and what the
    # row shows after the attempt count is not part of it.
    retry = "✻ API error · Retrying in 15s · attempt 1/10"
    assert limit_texts([retry]) == ["API error · Retrying · attempt 1/10"]
    assert limit_texts([retry.replace("15s", "9s")]) == limit_texts([retry])
    assert limit_texts([retry + "   4 ──"]) == limit_texts([retry])
    assert limit_texts(["Claude AI usage limit reached|1767225600"]) != []
    assert limit_texts(["5-hour limit reached ∙ resets 3pm"]) != []
    # A model talking about limits, or nothing at all, is not a limit.
    assert limit_texts(["I will add a rate limiter to the API client.", ""]) == []


def _redrawn(old: str, new: str) -> bytes:
    """The bytes that turn row 1's `old` into `new` as Claude Code writes them: only the
    cells that differ, the cursor moved (CHA) over the ones that stay (it compares the
    cells' colours too; here every cell has the default ones)."""
    out, skipped = "\x1b[1;1H", False
    for col, char in enumerate(new.ljust(len(old))):
        if col < len(old) and old[col] == char:
            skipped = True
            continue
        out += f"\x1b[{col + 1}G{char}" if skipped else char
        skipped = False
    return out.encode()


def test_a_retry_line_drawn_over_cells_it_shares_is_read_whole_from_the_screen() -> None:
    screen = GhosttyEmulator(4, 60)
    spinner = "✢ Accomplishing… (12s · ↓ 3 tokens)"
    retry = "✻ API error · Retrying in 15s · attempt 1/10"
    screen.feed(f"\x1b[1;1H{spinner}".encode())
    frame = _redrawn(spinner, retry)
    # The "A" stays where the spinner's word had one: what the CLI wrote says "PI error".
    assert b"API error" not in frame and b"PI error" in frame
    screen.feed(frame)
    assert limit_texts(screen.screen_text()) == ["API error · Retrying · attempt 1/10"]


def test_only_a_limit_drawn_since_the_last_hook_event_counts() -> None:
    old = "API Error: 429 slow down"
    retry = "✻ API error · Retrying in 15s · attempt 1/10"
    # A report the screen already showed at the hook event is over: that turn ended.
    assert new_limit_text(limit_texts([old, "❯ go on"]), limit_texts([old])) is None
    # One drawn since is current, the lowest when there are several.
    now = limit_texts([old, "❯ go on", retry])
    assert new_limit_text(now, limit_texts([old])) == "API error · Retrying · attempt 1/10"
    # The same report again is a new one: the screen shows it twice now.
    assert new_limit_text(limit_texts([old, old]), limit_texts([old])) == old
    # No hook event yet: everything on screen is new.
    assert new_limit_text(limit_texts([old]), []) == old
    # The retry line redrawn with its countdown down is the same report, not a new one.
    assert new_limit_text(limit_texts([retry.replace("15s", "3s")]), limit_texts([retry])) is None


# --- unread mail and why it is not being read -------------------------------------------


def unread(**changes: object) -> AgentStatus:
    mail = {"unread": 2, "first_unread": "20261201T070000Z-ab from pam: review?"}
    return explain(running(**{**mail, **changes}), T0 + 30)  # type: ignore[arg-type]


def test_idle_with_unread_names_the_message_and_each_reason() -> None:
    due = unread()
    assert due.kind == "idle_unread"
    assert due.why.startswith("2 messages unread, oldest 20261201T070000Z-ab from pam: review?")
    assert "nudges it at its next tick" in due.why

    held = unread(wake=WakeSeen(hold="the person is typing in its pane"))
    assert "holds its nudge back: the person is typing in its pane" in held.why
    assert held.evidence.startswith("wake path: held back (the person is typing")
    for hold in ("a permission prompt is open", "its pane is still printing"):
        assert hold in unread(wake=WakeSeen(hold=hold)).why

    nudged = unread(wake=WakeSeen(nudged_at=T0 + 20, sends=1, open=True, covered=2))
    assert "Nudged (1 so far); waiting for it to start a turn" in nudged.why
    assert clock(T0 + 20) in nudged.evidence

    gave_up = unread(wake=WakeSeen(nudged_at=T0 + 20, sends=3, gave_up=True, covered=2))
    assert "did not answer 3 nudges, so the wake path gave up" in gave_up.why

    once = unread(wake=WakeSeen(nudged_at=T0 + 20, sends=1, covered=2))
    assert "names a message once" in once.why

    told = unread(told=2)
    assert "told of this mail during a turn" in told.why

    released = unread(told=2, released=2, released_at=T0 + 25, blocks=3, manager_told=True)
    assert "let 2 messages go at its cap after 3 blocks" in released.why
    assert released.why.endswith("The manager was told.")
    assert released.evidence.startswith(f"Stop released at the cap at {clock(T0 + 25)}")
    # Released wins over whatever the wake path thinks: it will never push that mail.
    assert "at its cap" in unread(released=1, blocks=3, wake=WakeSeen(hold="paused")).why


def test_wake_seen_reads_the_watchdogs_memory() -> None:
    ids = frozenset({"a", "b"})
    assert wake_seen(None, "paused", ids, None) == WakeSeen(hold="paused")
    memory = WakeMemory(covered=ids, batch=1, batch_ids=ids, sends=1, last_sent=5.0, open=True)
    assert wake_seen(memory, None, ids, T0) == WakeSeen(nudged_at=T0, sends=1, open=True, covered=2)
    spent = WakeMemory(covered=ids, batch=1, batch_ids=ids, sends=MAX_SENDS, last_sent=5.0)
    assert wake_seen(spent, None, ids, T0).gave_up
    # Read meanwhile: nothing of that batch is left to give up on.
    assert not wake_seen(spent, None, frozenset({"c"}), T0).gave_up


# --- the person's hand, the process, the roster ------------------------------------------


def test_halted_and_paused_say_how_to_go_on_and_outrank_work() -> None:
    halted = explain(running(status="working", halted=True, paused=True), T0 + 2)
    assert halted.kind == "halted" and "`hive-office resume jim`" in halted.why
    paused = explain(running(status="working", paused=True, unread=1), T0 + 2)
    assert paused.kind == "paused" and paused.why.endswith("1 message unread wait.")


def test_exits_name_the_code_and_the_likely_cause() -> None:
    def exited(**changes: object) -> AgentStatus:
        return explain(running(status="exited", alive=False, pid=None, **changes), T0 + 50)  # type: ignore[arg-type]

    assert "exited normally (code 0)" in exited(exit_status=0).why
    assert "exited with code 2: it failed" in exited(exit_status=2).why
    assert "stopped by signal 15" in exited(exit_status=-15).why
    assert "Its session ended (SessionEnd)" in exited(exit_status=None).why
    closing = explain(running(status="exited", event="SessionEnd", event_at=T0 + 49), T0 + 50)
    assert closing.kind == "exited" and "SessionEnd" in closing.why
    failed = exited(exit_status=1, start_failed="exited (code 1) right after it started (0.4 s).")
    assert failed.why.startswith("Its CLI exited (code 1) right after it started")
    assert {exited(exit_status=c).kind for c in (0, 2, -15, None)} == {"exited"}
    assert "exit status 2" in exited(exit_status=2).evidence
    missing = explain(running(missing="`claude` is not installed."), T0)
    assert missing.kind == "exited" and "cannot start: `claude` is not installed" in missing.why


def test_offline_archived_send_only_and_hookless() -> None:
    never = explain(running(status="offline", alive=False, pid=None, event=None), T0)
    assert never.kind == "offline" and "--no-agents" in never.why
    assert never.evidence == "no process; no hook event yet"
    starting = explain(running(status="offline", event=None), T0 + 1)
    assert starting.kind == "offline" and "is starting (pid 4242)" in starting.why
    desk = explain(running(status="offline", alive=False, send_only=True), T0)
    assert desk.kind == "offline" and "send-only" in desk.why
    archived = explain(running(status="archived", alive=False), T0)
    assert archived.kind == "archived" and "spawn jim" in archived.why
    shell = explain(running(status="running", hookless=True, event=None), T0 + 5)
    assert shell.kind == "running" and "without hooks (pid 4242)" in shell.why
    mail = explain(running(status="running", hookless=True, unread=3), T0 + 5)
    assert "3 messages wait: it has no hooks, so the office cannot wake it" in mail.why


def test_the_same_situation_explains_the_same_at_any_later_time() -> None:
    """Evidence names times, not durations: the registry is not rewritten by the clock."""
    signals = running(status="working", event="PreToolUse", event_at=T0 + 3, tool="Bash: ls")
    assert explain(signals, T0 + 4) == explain(signals, T0 + 200)
    idle = running(unread=1, released=1, released_at=T0 + 5, blocks=3)
    assert explain(idle, T0 + 6) == explain(idle, T0 + 6000)


# --- every state has a reason -----------------------------------------------------------

_times = st.one_of(st.none(), st.floats(T0, T0 + 10_000, allow_nan=False))
_text = st.one_of(st.none(), st.text(max_size=40))
_signals = st.builds(
    Signals,
    id=st.sampled_from(["jim", "pam", "michael"]),
    status=st.sampled_from(
        ["offline", "running", "idle", "working", "waiting", "exited", "archived"]
    ),
    hookless=st.booleans(),
    send_only=st.booleans(),
    alive=st.booleans(),
    pid=st.one_of(st.none(), st.integers(1, 99999)),
    event=st.one_of(
        st.none(), st.sampled_from(["SessionStart", "PreToolUse", "Stop", "StopFailure"])
    ),
    event_at=_times,
    tool=st.one_of(st.none(), st.sampled_from(["AskUserQuestion", "Bash: ls"])),
    prompt=_text,
    output_at=_times,
    started_at=_times,
    exit_status=st.one_of(st.none(), st.integers(-64, 255)),
    start_failed=_text,
    missing=_text,
    paused=st.booleans(),
    halted=st.booleans(),
    unread=st.integers(0, 5),
    first_unread=_text,
    told=st.integers(0, 5),
    released=st.integers(0, 5),
    released_at=_times,
    blocks=st.integers(0, 5),
    manager_told=st.booleans(),
    wake=st.builds(
        WakeSeen,
        hold=_text,
        nudged_at=_times,
        sends=st.integers(0, 3),
        open=st.booleans(),
        gave_up=st.booleans(),
        covered=st.integers(0, 5),
    ),
    failure=st.one_of(
        st.none(),
        st.builds(
            Failure,
            error=st.sampled_from([*LIMIT_ERRORS, "authentication_failed", "unknown"]),
            text=st.text(max_size=40),
            at=st.floats(T0, T0 + 10_000),
        ),
    ),
    limit_text=_text,
    stall_after_s=st.floats(0.5, 1000),
)


@settings(max_examples=400, deadline=None)
@given(signals=_signals, later=st.floats(0, 20_000))
def test_every_state_has_a_reason_and_evidence(signals: Signals, later: float) -> None:
    shown = explain(signals, T0 + later)
    assert shown.kind in KINDS
    assert shown.why.strip() and shown.evidence.strip()


# --- `why` on a running office -----------------------------------------------------------


def test_why_answers_for_a_roster_agent_and_refuses_another(running: Running) -> None:
    socket = running.office.paths.control_socket
    reply = control.request(socket, ControlRequest(cmd="why", agent="jim"))
    assert reply.ok and reply.detail
    shown = msgspec.json.decode(reply.detail, type=AgentStatus)
    # `running` starts no CLIs.
    assert shown.kind == "offline" and "--no-agents" in shown.why
    entry = next(e for e in running.office.registry.snapshot().agents if e.id == "jim")
    assert (entry.state, entry.why, entry.evidence) == (shown.kind, shown.why, shown.evidence)
    refused = control.request(socket, ControlRequest(cmd="why", agent="toby"))
    assert not refused.ok and refused.error and "no agent 'toby'" in refused.error
    assert why_text("jim", reply.detail).splitlines() == [
        "jim: offline",
        shown.why,
        f"evidence: {shown.evidence}",
    ]


# --- the hook signals it reads ------------------------------------------------------------


def test_stop_failure_ends_the_turn_and_the_cap_names_what_it_released() -> None:
    raw = {
        "hook_event_name": "StopFailure",
        "session_id": "0b6c1f4e-0000-4000-8000-000000000000",
        "error": "rate_limit",
        "last_assistant_message": "API Error: 429 rate limited",
    }
    event = ClaudeProvider().canonical(raw)
    assert event is not None and event.error == "rate_limit"
    assert event.message == "API Error: 429 rate limited"
    facts = OfficeFacts(
        office="o", home=Path("/h"), hive=Path("/h/hive"), manager="m", stop_block_cap=1
    )
    jim = AgentView(id="jim", name="Jim", role="", manager=False, web=False, stop_blocks=1)
    failed = decide(event, jim, (), facts)
    assert failed.status == "idle" and failed.decision == HookDecision()
    assert failed.note == "turn failed: rate_limit: API Error: 429 rate limited"
    mail = (MailItem(id="m1", sender="pam", act="inform", subject="fyi"),)
    stop = CanonicalEvent(name="Stop", stop_hook_active=True)
    released = decide(stop, jim, mail, facts)
    assert released.decision.block is None and released.released == frozenset({"m1"})
    # Below the cap it blocks, and releases nothing.
    kept = decide(
        stop, AgentView(id="jim", name="Jim", role="", manager=False, web=False), mail, facts
    )
    assert kept.decision.block and not kept.released


def test_the_wake_path_keeps_and_logs_why_it_holds_a_nudge_back() -> None:
    logs: list[tuple[str, str]] = []
    nudges: list[str] = []
    mail = (MailItem(id="m1", sender="pam", act="inform", subject="fyi"),)
    view = WakeView(id="jim", status="idle", quiet_for=30.0, typed_ago=5.0, unread=mail)
    views = [view]
    dog = Watchdog(
        lambda: views,
        send_nudge=lambda a, t: nudges.append(t),
        tell_manager_once=lambda a, t: None,
        show_title=lambda a, t: None,
        log=lambda a, t: logs.append((a, t)),
    )
    for t in range(5):
        dog.tick(float(t))
    assert dog.holds == {"jim": "the person is typing in its pane"}
    assert logs == [("jim", "wake path holds its nudge back: the person is typing in its pane")]
    assert not nudges
    # Printing holds a nudge for a moment after every turn: kept, not logged.
    views[0] = dataclasses.replace(view, typed_ago=None, quiet_for=0.5)
    dog.tick(5.0)
    assert dog.holds == {"jim": PRINTING} and len(logs) == 1
    views[0] = dataclasses.replace(view, typed_ago=None)
    dog.tick(6.0)
    assert nudges and dog.holds == {} and dog.nudged_at["jim"] > 0
    # An agent the wake path no longer looks at (stopped) holds nothing.
    views[0] = dataclasses.replace(
        view, id="jim", paused=True, unread=(*mail, msgspec.structs.replace(mail[0], id="m2"))
    )
    dog.tick(17.0)  # past the first retry's wait: the guard is asked again
    assert dog.holds == {"jim": "paused"}
    views.clear()
    dog.tick(18.0)
    assert dog.holds == {}
