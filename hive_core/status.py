"""Why an agent is in the state it is shown in: one pure decision over what the office knows.

The office gathers an agent's signals (hook events, pane output, its process, its unread
mail and what the wake path and the Stop drain did with it, the person's pause or halt,
the CLI's own failure report) into `Signals`; `explain()` turns them into an
`AgentStatus`: a kind, one sentence of why, and the evidence (which signal, when). No
clock, no disk: `now` is given, every time is wall-clock seconds.

Evidence names absolute times, never "for 12 s", so the same situation explains the same
way on every pass and the registry is not rewritten by the clock alone.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable

import msgspec

from hive_core.schema import Status, StatusKind
from hive_core.text import stripped

# A StopFailure `error` (Claude Code's names) that means: wait, the API will not serve
# this agent now. Other failures (authentication, a bad request) end the turn too, but
# waiting will not cure them.
LIMIT_ERRORS = {
    "rate_limit": "the API's rate limit",
    "billing_error": "the account's usage limit (quota)",
    "overloaded": "the API being overloaded",
}
# What Claude Code prints while the API holds it up: 2.1.x shows "API error · Retrying
# in 15s · attempt 1/10" under its spinner while it waits to try again ("Usage limit
# reached · Retrying in ..." with the API's rate-limit headers); older ones "API Error
# (429 ...) · Retrying in 8 seconds", "API Error: 429 {...}", "Claude AI usage limit
# reached|1767225600", "5-hour limit reached ∙ resets 3pm".
LIMIT_TEXT = re.compile(
    r"API error · Retrying in|API Error:? \(?(?:429|529)\b|rate_limit_error"
    r"|\b(?:usage|rate|session|weekly|opus|sonnet|[0-9]+-hour) limit reached"
    r"|credit balance (?:is )?too low",
    re.IGNORECASE,
)
# A CLI's own sign-in, on screen after its SessionStart (Gemini reports its session before
# the person answered it), and what its screen shows once it is answered: the input line.
# Matched in the raw output: the CLIs draw each as one run of text.
SIGN_IN_TEXT = re.compile(
    rb"How would you like to authenticate|Waiting for authentication|Enter Gemini API Key"
)
READY_TEXT = re.compile(rb"Type your message")
# Output kept from the chunk before when the next is scanned: a phrase split across them.
SIGN_IN_OVERLAP = 64
_ATTEMPT = re.compile(r"attempt \d+/\d+")
# The countdown in a retry line: left out, so the text (and the registry) holds still.
_COUNTDOWN = re.compile(r"(Retrying) in [0-9][^·(]*", re.IGNORECASE)
# The kinds a pane title adds to the status word: those the word alone hides.
TITLE_KINDS = frozenset({"waiting", "idle_unread", "stalled", "rate_limited"})
# Claude Code's tool that asks the person a question in the pane.
ASK_TOOLS = frozenset({"AskUserQuestion"})


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """The CLI's report that its last turn ended on an API error (StopFailure)."""

    error: str  # rate_limit, billing_error, overloaded, authentication_failed, ...
    text: str  # what it told the person, one line
    at: float


class WakeSeen(msgspec.Struct, frozen=True, kw_only=True):
    """What the wake path did about the agent's unread mail."""

    hold: str | None = None  # why it holds a nudge back right now
    nudged_at: float | None = None  # the latest nudge
    sends: int = 0  # nudges for the latest batch
    open: bool = False  # that batch waits for the agent to start a turn
    gave_up: bool = False  # no answer to every retry
    # Unread messages some nudge already named (the wake path names a message once).
    covered: int = 0


class LinkDown(msgspec.Struct, frozen=True, kw_only=True):
    """A remote desk's ssh link is down: why, since when, and the office's next try."""

    reason: str
    at: float
    failures: int = 1  # failed links in a row
    delay: float | None = None  # seconds to the next attempt; None: not reconnecting
    stopped: str | None = None  # why it does not reconnect (the person paused it)


class Signals(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the office knows of one agent at `now` (times are wall-clock seconds)."""

    id: str
    status: Status
    hookless: bool = False
    send_only: bool = False
    alive: bool = False  # its CLI's process runs
    pid: int | None = None
    event: str | None = None  # the last hook event and when it came
    event_at: float | None = None
    tool: str | None = None  # the tool of the last PreToolUse/PostToolUse
    prompt: str | None = None  # a permission prompt's text (Notification)
    output_at: float | None = None  # the pane last printed
    started_at: float | None = None
    exit_status: int | None = None  # the code, or minus the signal
    start_failed: str | None = None
    missing: str | None = None
    paused: bool = False
    halted: bool = False
    unread: int = 0
    first_unread: str | None = None  # "ID from SENDER: SUBJECT" of the oldest unread
    told: int = 0  # unread it was told about inside a turn (digest or Stop block)
    released: int = 0  # unread the Stop drain let go at its block cap
    released_at: float | None = None
    blocks: int = 0  # the cap that released them
    manager_told: bool = False  # someone was told of the released mail
    wake: WakeSeen = WakeSeen()
    failure: Failure | None = None  # cleared when a turn starts
    limit_text: str | None = None  # limit text the pane drew since the last hook event
    sign_in: bool = False  # the pane's output after the last hook ends on its CLI's sign-in
    stall_after_s: float = 300.0
    link: LinkDown | None = None  # a remote desk's dropped ssh link
    uncontained: str | None = None  # why its CLI runs uncontained (None: contained)
    command: str = "hive-office"  # the office's command line hints name (hint.py)


class AgentStatus(msgspec.Struct, frozen=True):
    kind: StatusKind
    why: str
    evidence: str
    # Why its running CLI is not contained (desks/contain.py); None: contained, or
    # not running. Shown beside any kind: the map, the pane title and `why`.
    uncontained: str | None = None


def clock(at: float | None) -> str:
    """A time as the evidence shows it: UTC, to the second."""
    if at is None:
        return "never"
    return time.strftime("%H:%M:%SZ", time.gmtime(at))


def explain(s: Signals, now: float) -> AgentStatus:
    status = _explain(s, now)
    if s.uncontained is not None and s.alive and status.kind != "archived":
        return msgspec.structs.replace(status, uncontained=s.uncontained)
    return status


def _explain(s: Signals, now: float) -> AgentStatus:
    if s.status == "archived":
        return AgentStatus(
            "archived",
            f"It was archived: its mail goes to the manager; `{s.command} spawn "
            f"{s.id}` brings it back.",
            "registry: archived",
        )
    if s.missing:
        if s.status == "offline":  # held back before its first start (waiting for a login)
            return AgentStatus(
                "offline", f"Its CLI has not started: {s.missing}", "start: held back"
            )
        return AgentStatus("exited", f"Its CLI cannot start: {s.missing}", "start: not installed")
    if s.status == "disconnected":
        return _disconnected(s)
    if not s.alive or s.status == "exited":  # SessionEnd comes before the process ends
        return _not_running(s)
    if s.halted:
        return AgentStatus(
            "halted",
            f"The person halted it: its next tool call is refused and its turn is not "
            f"kept going; `{s.command} resume {s.id}` lets it go on.",
            f"halted; {_last_event(s)}",
        )
    if s.paused:
        return AgentStatus(
            "paused",
            f"The person paused it: tool calls are refused and mail is not pushed on it; "
            f"`{s.command} resume {s.id}`.{_mail_note(s)}",
            f"paused; {_last_event(s)}",
        )
    if s.failure is not None and s.failure.error in LIMIT_ERRORS:
        return AgentStatus(
            "rate_limited",
            f"Its last turn was refused for {LIMIT_ERRORS[s.failure.error]}: "
            f"{s.failure.text or s.failure.error}. It waits until the limit resets and "
            "something starts a turn.",
            f"StopFailure {s.failure.error} at {clock(s.failure.at)}",
        )
    if s.limit_text is not None and s.status in ("working", "idle", "running"):
        return AgentStatus(
            "rate_limited",
            f"The API holds it up and its CLI waits to try again: {s.limit_text}",
            f"pane output at {clock(s.output_at)} after {_last_event(s)}",
        )
    if s.sign_in and s.status in ("idle", "running"):
        return AgentStatus(
            "waiting",
            "Its CLI shows its sign-in in its pane and waits for the person: sign in there "
            "once (the office shares it with the office's other desks of that CLI), or give "
            "the desk a key in its env in office.toml.",
            f"pane output at {clock(s.output_at)} after {_last_event(s)}",
        )
    if s.hookless:
        mail = (
            f" {_count(s.unread)} wait{'s' if s.unread == 1 else ''}: it has no hooks, so the "
            "office cannot wake it; the manager was told. Run `hive inbox` in its pane."
            if s.unread
            else ""
        )
        return AgentStatus(
            "running",
            f"A CLI without hooks (pid {s.pid}): the office sees only its process and "
            f"output.{mail}",
            f"process alive; last output at {clock(s.output_at)}",
        )
    if s.status == "waiting":
        text = f": {s.prompt}" if s.prompt else ""
        return AgentStatus(
            "waiting",
            f"A permission prompt is open in its pane{text}. It waits for the person.",
            f"Notification permission_prompt at {clock(s.event_at)}",
        )
    if s.status == "working" and s.event == "PreToolUse" and s.tool in ASK_TOOLS:
        return AgentStatus(
            "waiting",
            "It asked the person a question in its pane and waits for the answer.",
            f"PreToolUse {s.tool} at {clock(s.event_at)}",
        )
    if s.status == "working":
        last = max(t for t in (s.event_at, s.output_at, s.started_at, 0.0) if t is not None)
        if now - last >= s.stall_after_s:
            return AgentStatus(
                "stalled",
                f"In a turn, but neither a hook event nor any output for over "
                f"{s.stall_after_s:g} s (stall_after_s): it may be hung; look at its pane.",
                f"{_last_event(s)}; last output at {clock(s.output_at)}",
            )
        doing = f" ({s.tool})" if s.tool else ""
        return AgentStatus(
            "working",
            f"In a turn{doing}.",
            f"{_last_event(s)}; last output at {clock(s.output_at)}",
        )
    if s.status == "offline":
        return AgentStatus(
            "offline",
            f"Its CLI is starting (pid {s.pid}); it has not reported its session yet.",
            f"started at {clock(s.started_at)}; no SessionStart",
        )
    failed = (
        f" Its last turn failed ({s.failure.error}): {s.failure.text}"
        if s.failure is not None
        else ""
    )
    if s.unread:
        why, evidence = _held(s)
        return AgentStatus("idle_unread", why + failed, f"{evidence}; {_last_event(s)}")
    return AgentStatus(
        "idle",
        f"At its prompt with nothing unread.{failed}",
        _last_event(s),
    )


def _not_running(s: Signals) -> AgentStatus:
    if s.send_only:
        return AgentStatus(
            "offline", "A send-only desk: it has no CLI, only a mailbox.", "roster: send_only"
        )
    if s.status != "exited":
        return AgentStatus(
            "offline",
            "Not started (the office runs with --no-agents, or it was never spawned); "
            f"`{s.command} spawn {s.id}` starts it.",
            f"no process; {_last_event(s)}",
        )
    if s.start_failed:
        return AgentStatus(
            "exited",
            f"Its CLI {s.start_failed}",
            f"exit status {s.exit_status} soon after start at {clock(s.started_at)}",
        )
    code = s.exit_status
    if code is None:
        cause = "Its session ended (SessionEnd)."
    elif code < 0:
        cause = (
            f"It was stopped by signal {-code}: the office's stop or archive, or someone killed it."
        )
    elif code == 0:
        cause = "It exited normally (code 0): /exit, or its session ended."
    else:
        cause = f"It exited with code {code}: it failed or quit on an error; its pane shows why."
    return AgentStatus(
        "exited",
        f"{cause} `{s.command} spawn {s.id}` starts it again.",
        f"exit status {code}; {_last_event(s)}",
    )


def _disconnected(s: Signals) -> AgentStatus:
    """A remote desk whose link is down: mail waits, the office reconnects."""
    link = s.link
    reason = link.reason if link is not None else "the ssh connection ended"
    if link is not None and link.delay is None:
        then = f"The office does not reconnect it ({link.stopped or 'stopped'}); " + (
            f"`{s.command} spawn {s.id}` does."
        )
        plan = "not reconnecting"
    else:
        then = "The office reconnects it and resumes its session."
        plan = (
            f"reconnecting in {link.delay:g} s"
            if link is not None and link.delay
            else "reconnecting"
        )
    tries = f" (attempt {link.failures})" if link is not None and link.failures > 1 else ""
    return AgentStatus(
        "disconnected",
        f"Its link to its host is down: {reason}. {then}{_mail_note(s)}",
        f"ssh link lost at {clock(link.at if link else None)}{tries}; {plan}",
    )


def _held(s: Signals) -> tuple[str, str]:
    """Why an idle agent's unread mail is not being read: (sentence, evidence)."""
    mail = f"{_count(s.unread)} unread" + (f", oldest {s.first_unread}" if s.first_unread else "")
    if s.released:
        told = " The manager was told." if s.manager_told else ""
        return (
            f"{mail}. The Stop drain let {_count(s.released)} go at its cap after "
            f"{s.blocks} blocks (the agent ended its turn without reading them); the wake "
            f"path does not push them again, so they wait until it reads its inbox.{told}",
            f"Stop released at the cap at {clock(s.released_at)}",
        )
    if s.wake.hold:
        return (
            f"{mail}. The wake path holds its nudge back: {s.wake.hold}.",
            f"wake path: held back ({s.wake.hold})",
        )
    if s.wake.gave_up:
        return (
            f"{mail}. It did not answer {s.wake.sends} nudges, so the wake path gave up on "
            "this mail; new mail starts a new nudge.",
            f"last nudge at {clock(s.wake.nudged_at)}",
        )
    if s.wake.open:
        return (
            f"{mail}. Nudged ({s.wake.sends} so far); waiting for it to start a turn.",
            f"nudge at {clock(s.wake.nudged_at)}",
        )
    if s.wake.covered >= s.unread:
        return (
            f"{mail}. A nudge named this mail and it started a turn but did not read it; "
            "the wake path names a message once.",
            f"nudge at {clock(s.wake.nudged_at)}",
        )
    if s.told >= s.unread:
        return (
            f"{mail}. It was told of this mail during a turn and ended the turn without "
            "reading it; the wake path does not repeat what a turn was told.",
            "digest given in a turn",
        )
    return (
        f"{mail}. The wake path nudges it at its next tick.",
        "wake path: nudge due",
    )


def _count(n: int) -> str:
    return f"{n} message{'s' if n != 1 else ''}"


def _mail_note(s: Signals) -> str:
    return f" {_count(s.unread)} unread wait." if s.unread else ""


def _last_event(s: Signals) -> str:
    if s.event is None:
        return "no hook event yet"
    return f"last hook {s.event} at {clock(s.event_at)}"


def sign_in_drawn(output: bytes) -> bool | None:
    """Whether a pane's `output` last drew its CLI's sign-in (True) or the input line
    that follows once it is answered (False); None: neither."""
    sign_in = [m.start() for m in SIGN_IN_TEXT.finditer(output)]
    ready = [m.start() for m in READY_TEXT.finditer(output)]
    if not sign_in and not ready:
        return None
    return bool(sign_in) and (not ready or sign_in[-1] > ready[-1])


def limit_texts(screen: Iterable[str]) -> list[str]:
    """Each report of a rate or usage limit on a pane's screen (its lines as drawn, top
    to bottom), one per line that has one, as plain text with the countdown left out.

    Read from the screen, not the bytes the CLI wrote: Claude Code redraws only the cells
    that changed, so the bytes of a retry line lack whatever letters the spinner's word
    before it had in the same columns ("Accomplishing" leaves "PI error")."""
    found: list[str] = []
    for line in screen:
        plain = " ".join(stripped(line, lines=False, by=" ").split())
        last = None
        for match in LIMIT_TEXT.finditer(plain):
            last = match
        if last is None:
            continue
        text = plain[last.start() : last.end() + 100]
        # A retry line ends at its attempt count; whatever the row shows next is not it.
        if (attempt := _ATTEMPT.search(text)) is not None:
            text = text[: attempt.end()]
        found.append(_COUNTDOWN.sub(r"\1 ", text).strip())
    return found


def new_limit_text(screen: list[str], before: Iterable[str]) -> str | None:
    """The lowest limit text on `screen` (limit_texts) that the screen did not already
    show at the agent's last hook event (`before`: limit_texts then): what the CLI has
    printed since is current, an old report still on screen is not."""
    left = Counter(screen)
    left.subtract(before)
    for text in reversed(screen):
        if left[text] > 0:
            return text
    return None
