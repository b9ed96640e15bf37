"""What the scripted model says: an ordered list of turns, each guarded by a predicate.

A request is the decoded JSON body of a POST /v1/messages (a plain dict: the agent CLI
decides its shape, and recording it verbatim is the point). Only the next unplayed turn
is tried, so a scenario reads top to bottom like a conversation; a main request that the
next turn does not match gets `Scenario.fallback` and the turn stays pending.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

Request = dict[str, Any]
Predicate = Callable[[Request], bool]

_tool_ids = itertools.count(1)


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    # The CLI pairs tool_result blocks to this id; unique per process so that two turns
    # calling the same tool never collide in one conversation.
    id: str = field(default_factory=lambda: f"toolu_scripted_{next(_tool_ids):04d}")


Block = Text | ToolUse


def bash(command: str, description: str = "scripted command") -> ToolUse:
    """A Bash tool call as Claude Code's Bash tool expects it."""
    return ToolUse("Bash", {"command": command, "description": description})


@dataclass(frozen=True)
class ApiError:
    """An HTTP error the API answers with instead of a message (a rate limit, an
    overload), in the API's error shape."""

    status: int = 429
    type: str = "rate_limit_error"
    message: str = "Number of request tokens has exceeded your per-minute rate limit"
    # Seconds the CLI is told to wait before it tries again (`retry-after`); None: it is
    # told not to retry at all, so the turn fails at once.
    retry_after: int | None = None


@dataclass(frozen=True)
class Turn:
    match: Predicate
    blocks: tuple[Block, ...]
    label: str = ""
    # Seconds the model "thinks" before answering: keeps an agent visibly working.
    delay: float = 0.0
    # Blocks made from the request itself (e.g. a reply to the message id the agent was
    # just told about); used instead of `blocks` when given.
    build: Callable[[Request], Sequence[Block]] | None = None
    # Play this turn again (fresh tool ids) while the request answering it matches: a
    # real model retries a tool the CLI could not run yet (an MCP server still starting).
    again_if: Predicate | None = None
    # Answer with this error instead of the blocks.
    error: ApiError | None = None

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


def api_error(match: Predicate, error: ApiError | None = None, *, label: str = "") -> Turn:
    """A turn the API refuses with an HTTP error (by default a 429 rate limit)."""
    return Turn(match, (), label or "error", error=error or ApiError())


def turn(
    match: Predicate,
    *blocks: Block | str,
    label: str = "",
    delay: float = 0.0,
    build: Callable[[Request], Sequence[Block]] | None = None,
    again_if: Predicate | None = None,
) -> Turn:
    """A turn; bare strings become text blocks."""
    return Turn(
        match,
        tuple(Text(b) if isinstance(b, str) else b for b in blocks),
        label,
        delay,
        build,
        again_if,
    )


# --- predicates -----------------------------------------------------------------------


def is_main(request: Request) -> bool:
    """The agent's own conversation request. Side requests (session title, summaries)
    carry no `tools`."""
    return bool(request.get("tools"))


def last_user_texts(request: Request) -> list[str]:
    """Every text in the last user message: plain text blocks and the text inside
    tool_result blocks. The CLI puts the prompt among system reminders and hook feedback,
    so a match has to look at all of them."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") != "user":
            continue
        return list(_texts(message.get("content")))
    return []


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            out.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            out.extend(_texts(block.get("content")))
    return out


def user_says(needle: str) -> Predicate:
    """The last user message contains `needle` in any of its texts."""
    return lambda request: any(needle in text for text in last_user_texts(request))


def has_tool_result() -> Predicate:
    """The last user message answers a tool call (the model's tool ran, or was denied)."""

    def match(request: Request) -> bool:
        for message in reversed(request.get("messages") or []):
            if message.get("role") == "user":
                content = message.get("content")
                return isinstance(content, list) and any(
                    isinstance(b, dict) and b.get("type") == "tool_result" for b in content
                )
        return False

    return match


def tool_result_says(needle: str) -> Predicate:
    """The last user message answers a tool call and contains `needle`."""
    answered = has_tool_result()
    return lambda request: answered(request) and user_says(needle)(request)


def anything(request: Request) -> bool:
    return True


# --- the script -----------------------------------------------------------------------


class Scenario:
    """Turns played in order, one per matching main request. Thread-safe: the server
    answers concurrent requests."""

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        fallback: str = "Nothing scripted for this request.",
        side_reply: str = "Scripted session",
        main: Predicate = is_main,
    ) -> None:
        self.turns = tuple(turns)
        # Which requests are the agent's conversation (another protocol shapes them
        # differently: responses.py).
        self.main = main
        self.fallback = Turn(anything, (Text(fallback),), label="fallback")
        self.side_reply = side_reply
        self._next = 0
        self.replays = 0
        self._lock = threading.Lock()

    @property
    def played(self) -> int:
        return self._next

    @property
    def done(self) -> bool:
        return self._next >= len(self.turns)

    def respond(self, request: Request) -> tuple[Turn, int | None]:
        """The turn answering `request` and its index (None: side reply or fallback,
        which consume nothing)."""
        if not self.main(request):
            return self._side_turn(request), None
        with self._lock:
            previous = self.turns[self._next - 1] if self._next else None
            if previous is not None and previous.again_if and previous.again_if(request):
                self.replays += 1
                return _fresh_ids(previous), self._next - 1
            if self._next < len(self.turns) and self.turns[self._next].match(request):
                index = self._next
                self._next += 1
                chosen = self.turns[index]
                if chosen.build is not None:
                    chosen = replace(chosen, blocks=tuple(chosen.build(request)))
                return chosen, index
        return self.fallback, None

    def _side_turn(self, request: Request) -> Turn:
        # The session-title request asks for JSON ({"title": ...}) through
        # output_config.format; plain text there would make the CLI log a parse error.
        fmt = (request.get("output_config") or {}).get("format") or {}
        schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
        if isinstance(schema, dict):
            props = schema.get("properties") or {}
            reply = {name: self.side_reply for name in schema.get("required") or props}
            return Turn(anything, (Text(json.dumps(reply)),), label="side")
        return Turn(anything, (Text(self.side_reply),), label="side")


def _fresh_ids(turn: Turn) -> Turn:
    """The same turn with new tool ids, so a replay never reuses an answered call's id."""
    blocks = tuple(ToolUse(b.name, b.input) if isinstance(b, ToolUse) else b for b in turn.blocks)
    return replace(turn, blocks=blocks, delay=max(turn.delay, 0.2))
