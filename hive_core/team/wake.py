"""The wake path: nudge an idle agent holding mail that nothing else will make it read.

The Stop drain (events/policy.py) hands mail to an agent at the end of a turn. Mail
that arrives while the agent sits at its prompt, or that the drain held back (paused,
the person typing), reaches nobody until something starts a turn. The watchdog types
one short line into that agent's terminal to start it.

The original app's watchdog re-nudged one agent 243 times in 75 minutes. Here a nudge
is edge-triggered: it is owed once per *batch* of mail nobody has told the agent about,
retried at most twice (with backoff) until the agent's UserPromptSubmit confirms it,
and a batch is never nudged again. Every guard is checked before each send.

`decide_wake()` is pure (plain data in, plain data out, no clock, no disk): the office
says what it knows (`WakeView`), the watchdog says what it remembers (`WakeMemory`),
and the decision carries the next memory. `Watchdog` runs it and performs the effects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hive_core.schema import MailItem, Status
from hive_core.status import WakeSeen
from hive_core.text import one_line

# Stop seen is not enough: the CLI may still be painting its last answer, and text
# pasted mid-paint can land in the wrong place.
QUIET_S = 2.0
# Unsubmitted typing holds the nudge back this long after the last key: the nudge goes
# into the same input box, and Enter would submit the person's half-written prompt. Much
# longer than the Stop drain's grace (which only adds context), but finite, because an
# Esc or a stray key is never "submitted" and must not block the wake path for good.
TYPING_HOLD_S = 60.0
# Waits before the first and the second retry of an unconfirmed nudge.
RETRY_BACKOFF_S = (10.0, 30.0)
MAX_SENDS = 1 + len(RETRY_BACKOFF_S)
# After its last send an unconfirmed batch stays open this long (mail arriving meanwhile
# joins it instead of starting a new round of nudges), then it is written off.
GIVE_UP_S = 60.0
NUDGE_MAX_CHARS = 120
# The guard that holds nearly every nudge for a moment after a turn: not worth a log line.
PRINTING = "its pane is still printing"
# The watchdog's tick while something may become due with time alone; otherwise only
# new mail (poke) can change anything and the slow tick is just a backstop.
TICK_S = 1.0
IDLE_TICK_S = 10.0
# Office mail whose id ends so waits for the agent's next turn and never starts one (the
# manager's floor digest, hive_core/team/digest.py): a digest must not wake anyone.
QUIET_SUFFIX = "-digest"
# A remote desk whose link is down: nothing reaches its terminal; after the reconnect its
# SessionStart (or the next tick) delivers what waits.
DISCONNECTED = "its ssh link is down; its mail waits for the reconnect"


@dataclass(frozen=True)
class WakeView:
    """What the office knows of one agent at this moment."""

    id: str
    status: Status
    # Seconds since its pane last printed anything.
    quiet_for: float
    # No hooks (a plain shell): it cannot confirm a nudge or be drained at Stop.
    hookless: bool = False
    manager: bool = False
    paused: bool = False
    halted: bool = False
    # Seconds since the person last typed into its pane; None if never, or if what they
    # typed has since been submitted (the office clears it at UserPromptSubmit).
    typed_ago: float | None = None
    unread: tuple[MailItem, ...] = ()
    # The ids of `unread` when the office already has them (its index does): hashing 20k
    # ids every tick would cost more than the rest of the decision.
    unread_ids: frozenset[str] | None = None
    # Ids the agent was told about inside a turn: the Stop drain's block or a
    # UserPromptSubmit/PostToolUse digest. Not SessionStart's context, which the model
    # only reads once a turn starts, i.e. after a nudge.
    announced: frozenset[str] = frozenset()


@dataclass(frozen=True)
class WakeMemory:
    """What the watchdog remembers of one agent between ticks."""

    # Ids some nudge already named: never a reason for another batch.
    covered: frozenset[str] = frozenset()
    batch: int = 0  # number of the latest batch; 0 before the first
    batch_ids: frozenset[str] = frozenset()
    sends: int = 0  # nudges sent for the latest batch
    last_sent: float | None = None
    # The latest batch is waiting for its UserPromptSubmit and may still be retried.
    open: bool = False
    # Hookless: the manager knows this mailbox cannot be drained (until it is empty).
    told_manager: bool = False
    # Hookless: what its pane title and badge show, None when there is no mail.
    title: str | None = None

    def confirm(self) -> WakeMemory:
        """The agent started a turn: the latest batch is done, whatever it read."""
        return replace(self, open=False)


@dataclass(frozen=True)
class WakeDecision:
    memory: WakeMemory  # what to remember once the effects below are done
    nudge: str | None = None  # type this: a bracketed paste, then Enter on its own
    tell_manager: str | None = None
    # A nudge is owed but a guard holds it back (the watchdog keeps ticking).
    hold: str | None = None
    note: str | None = None  # one line for the log when something happened


@dataclass(frozen=True)
class WakeFault:
    """An agent whose view could not be built this tick (its inbox unreadable, say)."""

    id: str
    error: str


def decide_wake(view: WakeView, memory: WakeMemory, now: float) -> WakeDecision:
    unread_ids = (
        frozenset(m.id for m in view.unread) if view.unread_ids is None else view.unread_ids
    )
    # Message ids are unique and read mail never returns, so memory of it can go.
    memory = replace(
        memory, covered=memory.covered & unread_ids, batch_ids=memory.batch_ids & unread_ids
    )
    if view.hookless:
        return _hookless(view, memory)
    fresh = frozenset(
        i for i in unread_ids - view.announced - memory.covered if not i.endswith(QUIET_SUFFIX)
    )
    if memory.open:
        left = memory.batch_ids - view.announced
        if not left and not fresh:
            # Read, or told in a turn some other way: nothing to wake it for.
            return WakeDecision(replace(memory, open=False))
        assert memory.last_sent is not None
        if memory.sends >= MAX_SENDS:
            if now - memory.last_sent < GIVE_UP_S:
                return WakeDecision(memory)
            return WakeDecision(
                replace(memory, open=False),
                note=f"no answer to {MAX_SENDS} nudges for batch {memory.batch}; gave up on it",
            )
        if now - memory.last_sent < RETRY_BACKOFF_S[memory.sends - 1]:
            return WakeDecision(memory)
        hold = _guard(view)
        if hold:
            return WakeDecision(memory, hold=hold)
        text = nudge_text(view.unread)
        return WakeDecision(
            replace(
                memory,
                covered=memory.covered | fresh,
                batch_ids=left | fresh,
                sends=memory.sends + 1,
                last_sent=now,
            ),
            nudge=text,
            note=f"nudged again (retry {memory.sends} of {MAX_SENDS - 1}): {text}",
        )
    if not fresh:
        return WakeDecision(memory)
    hold = _guard(view)
    if hold:
        return WakeDecision(memory, hold=hold)
    text = nudge_text(view.unread)
    return WakeDecision(
        replace(
            memory,
            covered=memory.covered | fresh,
            batch=memory.batch + 1,
            batch_ids=fresh,
            sends=1,
            last_sent=now,
            open=True,
        ),
        nudge=text,
        note=f"nudged: {text}",
    )


def _guard(view: WakeView) -> str | None:
    """Why nothing may be typed into this agent's terminal now, or None."""
    if view.halted:
        return "halted"
    if view.paused:
        return "paused"
    if view.status == "waiting":
        return "a permission prompt is open"
    if view.status == "disconnected":
        return DISCONNECTED
    if view.status != "idle":
        return f"it is {view.status}"
    if view.typed_ago is not None and view.typed_ago < TYPING_HOLD_S:
        return "the person is typing in its pane"
    if view.quiet_for < QUIET_S:
        return PRINTING
    return None


def _hookless(view: WakeView, memory: WakeMemory) -> WakeDecision:
    """A shell cannot be nudged (its input is a command line, and nothing would confirm):
    show the mail on its pane, and tell the manager once per non-empty spell."""
    if not view.unread:
        return WakeDecision(replace(memory, title=None, told_manager=False))
    summary = _summary(view.unread, NUDGE_MAX_CHARS)
    memory = replace(memory, title=summary)
    if memory.told_manager or view.manager:
        return WakeDecision(memory)
    text = (
        f"{view.id} has no hooks, so the office cannot wake it: {summary}. "
        f"They wait until someone runs `hive inbox` in its pane."
    )
    return WakeDecision(
        replace(memory, told_manager=True),
        tell_manager=text,
        note=f"cannot be woken (no hooks); told the manager: {summary}",
    )


def nudge_text(unread: Sequence[MailItem]) -> str:
    """One line, at most NUDGE_MAX_CHARS: what is waiting and what to run."""
    head, tail = "You have ", ". Run hive inbox."
    return head + _summary(unread, NUDGE_MAX_CHARS - len(head) - len(tail)) + tail


def _summary(unread: Sequence[MailItem], limit: int) -> str:
    """`2 unread messages (from jim, pam)`, naming as many senders as fit in `limit`."""
    count = len(unread)
    head = f"{count} unread message{'s' if count != 1 else ''}"
    # This text is pasted into a terminal.
    names = (one_line(m.sender) for m in unread)
    senders = [name for name in dict.fromkeys(names) if name]
    for shown in range(len(senders), 0, -1):
        more = f" and {len(senders) - shown} more" if shown < len(senders) else ""
        text = f"{head} (from {', '.join(senders[:shown])}{more})"
        if len(text) <= limit:
            return text
    return head


def wake_seen(
    memory: WakeMemory | None, hold: str | None, unread_ids: frozenset[str], nudged_at: float | None
) -> WakeSeen:
    """What the wake path did about this unread mail, for the explained status."""
    if memory is None:
        return WakeSeen(hold=hold)
    left = memory.batch_ids & unread_ids
    return WakeSeen(
        hold=hold,
        nudged_at=nudged_at,
        sends=memory.sends,
        open=memory.open,
        gave_up=not memory.open and memory.sends >= MAX_SENDS and bool(left),
        covered=len(memory.covered & unread_ids),
    )


# --- the effects ----------------------------------------------------------------------


@dataclass
class WakeStats:
    """Figures for the liveness benchmark."""

    # (agent, batch) -> nudges sent for it.
    sends: dict[tuple[str, int], int] = field(default_factory=dict)
    confirmed: set[tuple[str, int]] = field(default_factory=set)
    # Nudges the decision asked for that would have repeated a confirmed batch or gone
    # past MAX_SENDS; refused. Must stay 0.
    duplicates: int = 0
    told_manager: dict[str, int] = field(default_factory=dict)

    def nudges(self, agent_id: str) -> int:
        return sum(n for (aid, _), n in self.sends.items() if aid == agent_id)


class Watchdog:
    """Evaluates every agent on a slow tick (and at once when poked) and acts.

    Each agent is decided and acted on by itself: a fault in one agent's view, decision
    or effects is logged for that agent (once until it changes) and the others go on.
    The office supplies its views and effects as callables: `send_nudge` types the
    text (bracketed paste, then a separate Enter) without marking the pane as typed by
    the person; `tell_manager_once` gets a message to the manager; `show_title` puts a
    hookless agent's unread summary on its pane title and badge (None: clear it).
    """

    def __init__(
        self,
        views: Callable[[], Sequence[WakeView | WakeFault]],
        *,
        send_nudge: Callable[[str, str], None],
        tell_manager_once: Callable[[str, str], None],
        show_title: Callable[[str, str | None], None],
        log: Callable[[str, str], None],
    ) -> None:
        self.views = views
        self.send_nudge = send_nudge
        self.tell_manager_once = tell_manager_once
        self.show_title = show_title
        self.log = log
        self.memory: dict[str, WakeMemory] = {}
        # Why a nudge is held back now, and the wall-clock time of each agent's latest
        # nudge: what the explained status says about unread mail.
        self.holds: dict[str, str] = {}
        self.nudged_at: dict[str, float] = {}
        # The last fault logged per agent, so a lasting one is not logged every tick.
        self.faults: dict[str, str] = {}
        self.stats = WakeStats()
        self._poked = asyncio.Event()
        self._pending = False

    def poke(self) -> None:
        """Mail was routed (or something else changed): look now, not at the next tick."""
        self._poked.set()

    def confirmed(self, agent_id: str) -> None:
        """The event plane saw this agent's UserPromptSubmit."""
        memory = self.memory.get(agent_id)
        if memory is None or not memory.open:
            return
        self.memory[agent_id] = memory.confirm()
        self.stats.confirmed.add((agent_id, memory.batch))
        self.log(agent_id, f"woke up (batch {memory.batch}, after {memory.sends} nudge(s))")

    def tick(self, now: float) -> None:
        pending = False
        views = self.views()
        # A hold is about an agent the wake path still looks at (one stopped is not).
        looked_at = {view.id for view in views}
        self.holds = {k: v for k, v in self.holds.items() if k in looked_at}
        for view in views:
            if isinstance(view, WakeFault):
                # Look again at the quick tick: the fault may pass (a folder mid-rename).
                pending = True
                self._fault(view.id, view.error)
                continue
            before = self.memory.get(view.id, WakeMemory())
            try:
                decision = decide_wake(view, before, now)
            except Exception as exc:
                pending = True
                self._fault(view.id, repr(exc))
                continue
            self.memory[view.id] = decision.memory
            if decision.hold is not None:
                if decision.hold not in (self.holds.get(view.id), PRINTING):
                    self.log(view.id, f"wake path holds its nudge back: {decision.hold}")
                self.holds[view.id] = decision.hold
            else:
                self.holds.pop(view.id, None)
            pending = pending or decision.memory.open or decision.hold is not None
            # One agent's failing effect must not stop the others from being woken.
            try:
                self._act(view.id, before, decision)
            except Exception as exc:
                self.log(view.id, f"wake path failed: {exc!r}")
                continue
            if self.faults.pop(view.id, None) is not None:
                self.log(view.id, "wake path works for it again")
        self._pending = pending

    def _fault(self, agent_id: str, error: str) -> None:
        if self.faults.get(agent_id) != error:
            self.faults[agent_id] = error
            self.log(agent_id, f"wake path skipped it: {error}")

    def _act(self, agent_id: str, before: WakeMemory, decision: WakeDecision) -> None:
        after = decision.memory
        if decision.nudge is not None:
            key = (agent_id, after.batch)
            sent = self.stats.sends.get(key, 0)
            if key in self.stats.confirmed or sent >= MAX_SENDS:
                self.stats.duplicates += 1
                self.log(agent_id, f"refused a duplicate nudge for batch {after.batch}")
                return
            self.stats.sends[key] = sent + 1
            self.nudged_at[agent_id] = time.time()
            self.send_nudge(agent_id, decision.nudge)
        if decision.tell_manager is not None:
            self.stats.told_manager[agent_id] = self.stats.told_manager.get(agent_id, 0) + 1
            self.tell_manager_once(agent_id, decision.tell_manager)
        if after.title != before.title:
            self.show_title(agent_id, after.title)
        if decision.note:
            self.log(agent_id, decision.note)

    async def run(self, stop: asyncio.Event, clock: Callable[[], float] = time.monotonic) -> None:
        stopping = asyncio.ensure_future(stop.wait())
        poked = asyncio.ensure_future(self._poked.wait())
        try:
            while not stop.is_set():
                try:
                    self.tick(clock())
                except Exception as exc:
                    # Reading the views failed (a mailbox mid-rename, say): try next tick.
                    self.log("office", f"wake path tick failed: {exc!r}")
                await asyncio.wait(
                    {stopping, poked},
                    timeout=TICK_S if self._pending else IDLE_TICK_S,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if poked.done():
                    self._poked.clear()
                    poked = asyncio.ensure_future(self._poked.wait())
        finally:
            stopping.cancel()
            poked.cancel()
            await asyncio.gather(stopping, poked, return_exceptions=True)
