"""The wake path without a terminal: the pure decision, its guards and bounds, and the
watchdog's effects through recording callables."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_core.schema import MailItem, Status
from hive_core.team import wake
from hive_core.team.wake import (
    GIVE_UP_S,
    MAX_SENDS,
    NUDGE_MAX_CHARS,
    QUIET_S,
    RETRY_BACKOFF_S,
    TYPING_HOLD_S,
    WakeDecision,
    WakeFault,
    WakeMemory,
    WakeView,
    Watchdog,
    decide_wake,
    nudge_text,
)


def msg(n: int, sender: str = "pam") -> MailItem:
    return MailItem(id=f"m{n:04d}", sender=sender, act="request", subject=f"thing {n}")


IDLE = WakeView(id="jim", status="idle", quiet_for=30.0)
PAM_1 = (msg(1),)
TWO = (msg(1, "pam"), msg(2, "michael"))


def idle(**kw: object) -> WakeView:
    return replace(IDLE, **kw)  # type: ignore[arg-type]


def run_at(view: WakeView, memory: WakeMemory, *times: float) -> tuple[list[float], WakeMemory]:
    """Decide at each time in turn; the times at which a nudge went out."""
    sent = []
    for t in times:
        decision = decide_wake(view, memory, t)
        memory = decision.memory
        if decision.nudge:
            sent.append(t)
    return sent, memory


# --- the first nudge ----------------------------------------------------------------------


def test_an_idle_agent_with_new_mail_gets_one_nudge() -> None:
    decision = decide_wake(idle(unread=TWO), WakeMemory(), 100.0)
    assert decision.nudge == "You have 2 unread messages (from pam, michael). Run hive inbox."
    assert decision.hold is None
    memory = decision.memory
    assert (memory.batch, memory.sends, memory.last_sent, memory.open) == (1, 1, 100.0, True)
    assert memory.covered == memory.batch_ids == {"m0001", "m0002"}
    # The very next tick sends nothing: one nudge, not one a tick.
    assert decide_wake(idle(unread=TWO), memory, 101.0).nudge is None


def test_no_mail_no_nudge() -> None:
    decision = decide_wake(IDLE, WakeMemory(), 0.0)
    assert decision == WakeDecision(WakeMemory())


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"status": "working"}, "it is working"),
        ({"status": "waiting"}, "a permission prompt is open"),
        ({"status": "offline"}, "it is offline"),
        ({"status": "exited"}, "it is exited"),
        ({"paused": True}, "paused"),
        ({"halted": True}, "halted"),
        ({"typed_ago": 0.5}, "the person is typing in its pane"),
        ({"typed_ago": TYPING_HOLD_S - 1}, "the person is typing in its pane"),
        ({"quiet_for": 0.0}, "its pane is still printing"),
        ({"quiet_for": QUIET_S - 0.1}, "its pane is still printing"),
    ],
)
def test_every_guard_holds_the_nudge_back(changes: dict[str, object], reason: str) -> None:
    decision = decide_wake(idle(unread=TWO, **changes), WakeMemory(), 0.0)
    assert decision.nudge is None
    assert decision.hold == reason
    # Held, not spent: nothing is remembered as sent, so it goes once the guard clears.
    assert decision.memory == WakeMemory()
    assert decide_wake(idle(unread=TWO), decision.memory, 1.0).nudge is not None


def test_typing_long_ago_and_never_submitted_stops_holding() -> None:
    # An Esc or a stray key is never submitted: it must not block the wake path for good.
    assert decide_wake(idle(unread=PAM_1, typed_ago=TYPING_HOLD_S), WakeMemory(), 0.0).nudge
    assert decide_wake(idle(unread=PAM_1, typed_ago=None), WakeMemory(), 0.0).nudge


def test_a_quiet_pane_is_quiet_from_the_threshold_on() -> None:
    assert decide_wake(idle(unread=PAM_1, quiet_for=QUIET_S), WakeMemory(), 0.0).nudge


# --- edge triggering ----------------------------------------------------------------------


def test_mail_the_stop_drain_announced_is_not_nudged() -> None:
    view = idle(unread=TWO, announced=frozenset({"m0001", "m0002"}))
    sent, memory = run_at(view, WakeMemory(), *range(0, 4500, 7))
    assert sent == []
    assert memory == WakeMemory()


def test_only_mail_nobody_announced_makes_a_batch() -> None:
    view = idle(unread=TWO, announced=frozenset({"m0001"}))
    decision = decide_wake(view, WakeMemory(), 0.0)
    # The nudge tells the whole mailbox (that is what `hive inbox` shows) ...
    assert decision.nudge == "You have 2 unread messages (from pam, michael). Run hive inbox."
    # ... but the batch is the mail that was not delivered.
    assert decision.memory.batch_ids == {"m0002"}


def test_a_confirmed_batch_is_never_nudged_again() -> None:
    view = idle(unread=TWO)
    first = decide_wake(view, WakeMemory(), 0.0)
    assert first.nudge
    # The agent took the turn but left the mail unread; it is idle again for 75 minutes.
    sent, memory = run_at(view, first.memory.confirm(), *range(1, 4500))
    assert sent == []
    assert not memory.open and memory.batch == 1


def test_a_new_message_makes_a_new_batch() -> None:
    first = decide_wake(idle(unread=PAM_1), WakeMemory(), 0.0)
    memory = first.memory.confirm()
    second = decide_wake(idle(unread=(msg(1), msg(2, "oscar"))), memory, 50.0)
    assert second.nudge == "You have 2 unread messages (from pam, oscar). Run hive inbox."
    assert (second.memory.batch, second.memory.sends) == (2, 1)
    assert second.memory.batch_ids == {"m0002"}
    assert second.memory.covered == {"m0001", "m0002"}


def test_read_mail_is_forgotten() -> None:
    first = decide_wake(idle(unread=TWO), WakeMemory(), 0.0).memory.confirm()
    after = decide_wake(idle(unread=(msg(2, "michael"),)), first, 5.0).memory
    assert after.covered == {"m0002"}
    assert decide_wake(IDLE, after, 6.0).memory.covered == frozenset()


# --- retries and backoff ------------------------------------------------------------------


def test_an_unconfirmed_nudge_is_retried_twice_with_backoff() -> None:
    first, second = RETRY_BACKOFF_S
    times = [0.0, first - 0.1, first, first + second - 0.1, first + second, 1e4, 1e5]
    sent, memory = run_at(idle(unread=TWO), WakeMemory(), *times)
    assert sent == [0.0, first, first + second]
    assert MAX_SENDS == 3 and memory.sends == 3


def test_a_retry_waits_for_its_guards_too() -> None:
    memory = decide_wake(idle(unread=PAM_1), WakeMemory(), 0.0).memory
    due = RETRY_BACKOFF_S[0]
    held = decide_wake(idle(unread=PAM_1, status="waiting"), memory, due)
    assert held.nudge is None and held.hold == "a permission prompt is open"
    retry = decide_wake(idle(unread=PAM_1), held.memory, due + 25.0)
    assert retry.nudge and retry.memory.sends == 2
    assert retry.note is not None and "retry 1 of 2" in retry.note
    # The second retry's backoff counts from when the first retry actually went out.
    sent, _ = run_at(
        idle(unread=PAM_1), retry.memory, due + 25 + RETRY_BACKOFF_S[1] - 1, due + 25 + 30
    )
    assert sent == [due + 25 + 30]


def test_confirmation_stops_the_retries() -> None:
    memory = decide_wake(idle(unread=TWO), WakeMemory(), 0.0).memory.confirm()
    sent, _ = run_at(idle(unread=TWO), memory, *range(1, 600))
    assert sent == []


def test_a_batch_that_was_read_is_not_retried() -> None:
    memory = decide_wake(idle(unread=PAM_1), WakeMemory(), 0.0).memory
    closed = decide_wake(IDLE, memory, 1.0).memory
    assert not closed.open
    sent, _ = run_at(IDLE, closed, *range(2, 200))
    assert sent == []


def test_a_batch_announced_in_a_turn_is_not_retried() -> None:
    memory = decide_wake(idle(unread=PAM_1), WakeMemory(), 0.0).memory
    told = idle(unread=PAM_1, announced=frozenset({"m0001"}))
    sent, memory = run_at(told, memory, *range(1, 200))
    assert sent == [] and not memory.open


def test_mail_arriving_during_an_open_batch_joins_it() -> None:
    memory = decide_wake(idle(unread=PAM_1), WakeMemory(), 0.0).memory
    more = idle(unread=(msg(1), msg(2, "oscar")))
    # No fresh round of nudges for the newcomer: it waits for the batch's retry.
    assert decide_wake(more, memory, 5.0).nudge is None
    retry = decide_wake(more, memory, RETRY_BACKOFF_S[0])
    assert retry.nudge == "You have 2 unread messages (from pam, oscar). Run hive inbox."
    assert (retry.memory.batch, retry.memory.sends) == (1, 2)
    assert retry.memory.batch_ids == retry.memory.covered == {"m0001", "m0002"}


def test_an_unanswered_batch_is_given_up_and_later_mail_starts_a_new_one() -> None:
    first, second = RETRY_BACKOFF_S
    last = first + second
    sent, memory = run_at(idle(unread=PAM_1), WakeMemory(), 0.0, first, last)
    assert len(sent) == 3
    # Mail after the last retry joins the batch: no nudge inside the give-up window.
    late = idle(unread=(msg(1), msg(2, "oscar")))
    assert decide_wake(late, memory, last + GIVE_UP_S - 1).nudge is None
    gave_up = decide_wake(late, memory, last + GIVE_UP_S)
    assert gave_up.nudge is None and not gave_up.memory.open
    assert gave_up.note == "no answer to 3 nudges for batch 1; gave up on it"
    # The newcomer was never named by a nudge, so it is a batch of its own.
    fresh = decide_wake(late, gave_up.memory, last + GIVE_UP_S + 1)
    assert fresh.nudge and (fresh.memory.batch, fresh.memory.batch_ids) == (2, {"m0002"})
    # The given-up mail alone is never nudged again.
    sent, _ = run_at(idle(unread=PAM_1), gave_up.memory, *range(200, 5000, 3))
    assert sent == []


# --- hookless agents ----------------------------------------------------------------------


def test_a_hookless_agent_is_never_nudged_and_the_manager_is_told_once() -> None:
    shell = WakeView(id="sam", status="offline", quiet_for=0.0, hookless=True, unread=TWO)
    first = decide_wake(shell, WakeMemory(), 0.0)
    assert first.nudge is None
    assert first.memory.title == "2 unread messages (from pam, michael)"
    assert first.tell_manager == (
        "sam has no hooks, so the office cannot wake it: 2 unread messages (from pam, "
        "michael). They wait until someone runs `hive inbox` in its pane."
    )
    more = replace(shell, unread=(*TWO, msg(3, "oscar")))
    second = decide_wake(more, first.memory, 60.0)
    assert second.nudge is None and second.tell_manager is None
    assert second.memory.title == "3 unread messages (from pam, michael, oscar)"
    # Once its mailbox is empty, the next mail is news to the manager again.
    empty = decide_wake(replace(shell, unread=()), second.memory, 61.0).memory
    assert empty.title is None and not empty.told_manager
    again = decide_wake(replace(shell, unread=(msg(4),)), empty, 62.0)
    assert again.tell_manager is not None and again.memory.told_manager


def test_a_hookless_manager_is_not_told_about_itself() -> None:
    shell = WakeView(id="boss", status="offline", quiet_for=0.0, hookless=True, manager=True)
    decision = decide_wake(replace(shell, unread=PAM_1), WakeMemory(), 0.0)
    assert decision.tell_manager is None and decision.nudge is None
    assert decision.memory.title == "1 unread message (from pam)"


# --- the text -----------------------------------------------------------------------------


def test_nudge_text_is_one_short_line() -> None:
    assert nudge_text(PAM_1) == "You have 1 unread message (from pam). Run hive inbox."
    # Repeat senders are named once.
    assert nudge_text((msg(1), msg(2), msg(3, "jim"))) == (
        "You have 3 unread messages (from pam, jim). Run hive inbox."
    )
    crowd = tuple(msg(n, f"agent-with-a-very-long-name-{n:03d}") for n in range(20))
    text = nudge_text(crowd)
    assert len(text) <= NUDGE_MAX_CHARS and "\n" not in text
    assert text.startswith("You have 20 unread messages (from agent-with-a-very-long-name-000")
    assert text.endswith(" more). Run hive inbox.")
    # What goes into a terminal carries no control characters, whatever the sender says.
    assert nudge_text((msg(1, "ev\x1b[201~il\r"),)).isprintable()


@given(
    st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=30),
)
def test_nudge_text_never_exceeds_the_limit(senders: list[str]) -> None:
    text = nudge_text(tuple(msg(n, s) for n, s in enumerate(senders)))
    assert len(text) <= NUDGE_MAX_CHARS
    assert text.isprintable()


# --- the watchdog -------------------------------------------------------------------------


@dataclass
class Calls:
    """What the watchdog did, through our own recording callables."""

    nudges: list[tuple[str, str]] = field(default_factory=list)
    told: list[tuple[str, str]] = field(default_factory=list)
    titles: list[tuple[str, str | None]] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)


def watchdog(views: dict[str, WakeView], calls: Calls) -> Watchdog:
    return Watchdog(
        lambda: list(views.values()),
        send_nudge=lambda a, t: calls.nudges.append((a, t)),
        tell_manager_once=lambda a, t: calls.told.append((a, t)),
        show_title=lambda a, t: calls.titles.append((a, t)),
        log=lambda a, t: calls.logs.append((a, t)),
    )


def test_watchdog_nudges_confirms_and_counts() -> None:
    calls = Calls()
    views = {"jim": idle(unread=TWO), "pam": replace(IDLE, id="pam")}
    dog = watchdog(views, calls)
    dog.tick(0.0)
    dog.tick(1.0)
    assert calls.nudges == [
        ("jim", "You have 2 unread messages (from pam, michael). Run hive inbox.")
    ]
    assert calls.logs == [("jim", "nudged: " + calls.nudges[0][1])]
    dog.confirmed("jim")
    dog.confirmed("jim")  # a later prompt of the same turn confirms nothing new
    dog.confirmed("pam")  # never nudged: nothing to confirm
    assert calls.logs[1:] == [("jim", "woke up (batch 1, after 1 nudge(s))")]
    for t in range(2, 600):
        dog.tick(float(t))
    assert len(calls.nudges) == 1
    assert dog.stats.sends == {("jim", 1): 1}
    assert dog.stats.confirmed == {("jim", 1)}
    assert dog.stats.nudges("jim") == 1 and dog.stats.nudges("pam") == 0
    assert dog.stats.duplicates == 0


def test_watchdog_shows_hookless_mail_and_tells_the_manager_once() -> None:
    calls = Calls()
    shell = WakeView(id="sam", status="offline", quiet_for=0.0, hookless=True, unread=PAM_1)
    views = {"sam": shell}
    dog = watchdog(views, calls)
    for t in range(10):
        dog.tick(float(t))
    assert calls.nudges == []
    assert [a for a, _ in calls.told] == ["sam"]
    # The title is set when it changes, not every tick.
    assert calls.titles == [("sam", "1 unread message (from pam)")]
    views["sam"] = replace(shell, unread=())
    dog.tick(10.0)
    assert calls.titles[-1] == ("sam", None)
    assert dog.stats.told_manager == {"sam": 1}


def test_one_failing_agent_does_not_stop_the_others() -> None:
    calls = Calls()
    views = {"jim": idle(unread=PAM_1), "pam": replace(IDLE, id="pam", unread=(msg(9, "jim"),))}

    def send(agent: str, text: str) -> None:
        if agent == "jim":
            raise OSError("pty closed")
        calls.nudges.append((agent, text))

    dog = Watchdog(
        lambda: list(views.values()),
        send_nudge=send,
        tell_manager_once=lambda a, t: None,
        show_title=lambda a, t: None,
        log=lambda a, t: calls.logs.append((a, t)),
    )
    dog.tick(0.0)
    assert calls.nudges == [("pam", "You have 1 unread message (from jim). Run hive inbox.")]
    assert ("jim", "wake path failed: OSError('pty closed')") in calls.logs
    # A failed send still counts as an attempt: the bound holds even when sends fail.
    assert dog.memory["jim"].sends == 1


def test_watchdog_refuses_a_nudge_for_a_confirmed_batch() -> None:
    calls = Calls()
    dog = watchdog({"jim": idle(unread=PAM_1)}, calls)
    # A memory that contradicts the record (as a decision bug would produce).
    dog.memory["jim"] = WakeMemory(
        covered=frozenset({"m0001"}),
        batch=1,
        batch_ids=frozenset({"m0001"}),
        sends=1,
        last_sent=0.0,
        open=True,
    )
    dog.stats.confirmed.add(("jim", 1))
    dog.tick(RETRY_BACKOFF_S[0])
    assert calls.nudges == []
    assert dog.stats.duplicates == 1
    assert calls.logs[-1] == ("jim", "refused a duplicate nudge for batch 1")


def test_75_minutes_of_unread_mail_give_at_most_three_nudges() -> None:
    """The original watchdog nudged one agent 243 times in 75 minutes."""
    calls = Calls()
    dog = watchdog({"jim": idle(unread=TWO)}, calls)
    for t in range(75 * 60):
        dog.tick(float(t))
    assert len(calls.nudges) == MAX_SENDS == 3
    assert dog.stats.sends == {("jim", 1): 3}


def test_75_minutes_with_a_confirming_agent_give_one_nudge() -> None:
    calls = Calls()
    dog = watchdog({"jim": idle(unread=TWO)}, calls)
    for t in range(75 * 60):
        sent = len(calls.nudges)
        dog.tick(float(t))
        if len(calls.nudges) > sent:
            dog.confirmed("jim")  # it took the turn, but left the mail unread
    assert len(calls.nudges) == 1
    assert dog.stats.duplicates == 0


async def test_run_ticks_when_poked_and_stops_promptly(monkeypatch: pytest.MonkeyPatch) -> None:
    # Slow ticks: anything faster than them came from a poke.
    monkeypatch.setattr(wake, "TICK_S", 30.0)
    monkeypatch.setattr(wake, "IDLE_TICK_S", 30.0)
    ticks: list[float] = []
    views: dict[str, WakeView] = {}

    def look() -> list[WakeView]:
        ticks.append(time.monotonic())
        return list(views.values())

    calls = Calls()
    dog = Watchdog(
        look,
        send_nudge=lambda a, t: calls.nudges.append((a, t)),
        tell_manager_once=lambda a, t: None,
        show_title=lambda a, t: None,
        log=lambda a, t: calls.logs.append((a, t)),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(dog.run(stop))
    await asyncio.sleep(0.05)
    assert len(ticks) == 1  # the first look at start, then nothing until poked
    views["jim"] = idle(unread=PAM_1)
    dog.poke()
    await asyncio.sleep(0.05)
    assert len(ticks) == 2
    assert calls.nudges == [("jim", "You have 1 unread message (from pam). Run hive inbox.")]
    dog.poke()
    dog.poke()  # pokes between two looks fold into one
    await asyncio.sleep(0.05)
    assert len(ticks) == 3
    started = time.monotonic()
    stop.set()
    await asyncio.wait_for(task, 1.0)
    assert time.monotonic() - started < 0.5
    assert len(calls.nudges) == 1


async def test_run_survives_a_failing_look(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wake, "IDLE_TICK_S", 0.01)
    logs: list[tuple[str, str]] = []
    looks = 0

    def look() -> list[WakeView]:
        nonlocal looks
        looks += 1
        if looks == 1:
            raise FileNotFoundError("inbox")
        return []

    dog = Watchdog(
        look,
        send_nudge=lambda a, t: None,
        tell_manager_once=lambda a, t: None,
        show_title=lambda a, t: None,
        log=lambda a, t: logs.append((a, t)),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(dog.run(stop))
    deadline = asyncio.get_running_loop().time() + 10
    while looks <= 2:  # it goes on looking after the failure
        assert asyncio.get_running_loop().time() < deadline, "the tick stopped after a failure"
        await asyncio.sleep(0.01)
    stop.set()
    await task
    assert logs == [("office", "wake path tick failed: FileNotFoundError('inbox')")]


# --- random lives of an agent -------------------------------------------------------------


@dataclass
class Agent:
    """A simulated agent as the office would see it."""

    status: Status = "idle"
    paused: bool = False
    halted: bool = False
    typed_at: float | None = None
    printed_at: float = -100.0
    unread: dict[str, str] = field(default_factory=dict)
    announced: set[str] = field(default_factory=set)
    arrivals: int = 0

    def view(self, now: float) -> WakeView:
        return WakeView(
            id="jim",
            status=self.status,
            quiet_for=now - self.printed_at,
            paused=self.paused,
            halted=self.halted,
            typed_ago=None if self.typed_at is None else now - self.typed_at,
            unread=tuple(
                MailItem(id=i, sender=s, act="inform", subject="x") for i, s in self.unread.items()
            ),
            announced=frozenset(self.announced),
        )


# Mail and time, the wake path's inputs, come up most often; guards clear more often
# than they are set, so the agent is free to be woken now and then.
KINDS = [
    *["wait"] * 6,
    *["mail"] * 3,
    *["stop"] * 2,  # Stop: drained (the digest blocks it) or released
    "prompt",  # UserPromptSubmit: a turn starts
    "read",
    "type",
    "permission",
    "print",
    "pause",
    *["resume"] * 3,
    "halt",
    *["unhalt"] * 3,
]
events = st.tuples(
    st.sampled_from(KINDS),
    st.floats(0.1, 120.0),
    st.sampled_from(["pam", "michael", "oscar"]),
    st.booleans(),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(events, min_size=10, max_size=150), st.lists(st.booleans(), min_size=1, max_size=8))
def test_random_lives_never_break_the_bounds(
    script: list[tuple[str, float, str, bool]], answers: list[bool]
) -> None:
    """Whether the agent answers each nudge (a UserPromptSubmit at once) is drawn too."""
    agent = Agent()
    now = 0.0
    sends: dict[int, list[float]] = {}
    confirmed: set[int] = set()
    logs: list[str] = []
    # Every unread message is announced at a prompt, so only later mail may be nudged.
    mail_since_prompt = False
    dog: Watchdog

    def send(agent_id: str, text: str) -> None:
        # Every guard held at the moment of the send.
        view = agent.view(now)
        assert view.status == "idle" and not view.paused and not view.halted
        assert view.typed_ago is None or view.typed_ago >= TYPING_HOLD_S
        assert view.quiet_for >= QUIET_S
        assert len(text) <= NUDGE_MAX_CHARS
        batch = dog.memory[agent_id].batch
        assert batch not in confirmed, "a confirmed batch was nudged again"
        assert mail_since_prompt, "nudged after a turn started, with no new mail since"
        sends.setdefault(batch, []).append(now)
        agent.printed_at = now  # the paste echoes
        if answers[sum(len(t) for t in sends.values()) % len(answers)]:
            prompt()

    def prompt() -> None:
        nonlocal mail_since_prompt
        mail_since_prompt = False
        memory = dog.memory.get("jim")
        if memory is not None and memory.open:
            confirmed.add(memory.batch)
        agent.status = "working"
        agent.typed_at = None
        agent.announced |= set(agent.unread)  # the UserPromptSubmit digest
        dog.confirmed("jim")

    dog = Watchdog(
        lambda: [agent.view(now)],
        send_nudge=send,
        tell_manager_once=lambda a, t: None,
        show_title=lambda a, t: None,
        log=lambda a, t: logs.append(t),
    )
    for kind, seconds, sender, drained in script:
        if kind == "wait":
            now += seconds
        elif kind == "mail":
            agent.arrivals += 1
            agent.unread[f"m{agent.arrivals:04d}"] = sender
            mail_since_prompt = True
        elif kind == "stop":
            agent.printed_at = now
            if drained and agent.unread and not (agent.paused or agent.halted):
                agent.announced |= set(agent.unread)  # the drain's digest
            else:
                agent.status = "idle"
        elif kind == "prompt":
            prompt()
        elif kind == "read":
            agent.unread.clear()
        elif kind == "type":
            agent.typed_at = now
        elif kind == "permission":
            agent.status = "waiting"
        elif kind == "print":
            agent.printed_at = now
        elif kind in ("pause", "resume"):
            agent.paused = kind == "pause"
        elif kind in ("halt", "unhalt"):
            agent.halted = kind == "halt"
        dog.tick(now)

    # The watchdog logs what a callable raised; the checks in send() raise.
    assert not [line for line in logs if "failed" in line], logs
    for batch, times in sends.items():
        assert len(times) <= MAX_SENDS, f"batch {batch} nudged {len(times)} times"
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(g >= min_gap for g, min_gap in zip(gaps, RETRY_BACKOFF_S, strict=False))
    # A batch needs mail nobody was told about, so the nudges are bounded by the mail.
    assert sum(len(t) for t in sends.values()) <= MAX_SENDS * agent.arrivals
    assert dog.stats.duplicates == 0


def test_an_agent_whose_view_fails_is_logged_once_and_the_others_are_nudged() -> None:
    calls = Calls()
    fault = WakeFault("jim", "its unread mail cannot be read: RecursionError()")
    looks: dict[str, WakeView | WakeFault] = {
        "jim": fault,
        "pam": replace(IDLE, id="pam", unread=(msg(9, "jim"),)),
    }
    dog = Watchdog(
        lambda: list(looks.values()),
        send_nudge=lambda a, t: calls.nudges.append((a, t)),
        tell_manager_once=lambda a, t: None,
        show_title=lambda a, t: None,
        log=lambda a, t: calls.logs.append((a, t)),
    )
    for t in range(3):
        dog.tick(float(t))
    assert calls.nudges == [("pam", "You have 1 unread message (from jim). Run hive inbox.")]
    assert [line for line in calls.logs if line[0] == "jim"] == [
        ("jim", f"wake path skipped it: {fault.error}")
    ]
    assert dog._pending  # a fault is looked at again on the quick tick
    # Once its view can be built again, it is woken like anyone else.
    looks["jim"] = idle(unread=PAM_1)
    dog.tick(3.0)
    assert calls.nudges[-1] == ("jim", "You have 1 unread message (from pam). Run hive inbox.")
    assert calls.logs[-1] == ("jim", "wake path works for it again")
