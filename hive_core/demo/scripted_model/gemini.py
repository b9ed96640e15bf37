"""A scripted Gemini API (generateContent) on 127.0.0.1, for tests and the bench.

The same `Scenario` as the Anthropic stand-in, spoken as Gemini CLI 0.61 speaks to
`GOOGLE_GEMINI_BASE_URL`: `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`
for the agent's conversation (a request carrying `tools`), answered as server-sent
events whose chunks hold `candidates[0].content.parts` (text, then `functionCall`
parts) and, on the last one, `finishReason` and `usageMetadata`;
`POST .../<model>:generateContent` for the CLI's side questions (the model router's
classifier, the next-speaker check), answered with JSON that fits the request's
`responseJsonSchema`. Every request is recorded, as `RecordedRequest`s.

Scenario predicates here read Gemini's request shape (`contents`, `parts`,
`functionResponse`); `ToolUse` names Gemini's own tools (`shell` builds a
run_shell_command call). A scenario written for the Anthropic stand-in (the demo's
brains) plays here too: the scenario sees the request with a Claude-shaped `messages`
view beside Gemini's `contents` (`claude_view`), and a Claude tool it names is called
by its Gemini name (`GEMINI_TOOLS`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import msgspec

from hive_core.demo.scripted_model.anthropic import RecordedRequest, RecordingHandler, ScriptedModel
from hive_core.demo.scripted_model.scenario import (
    Predicate,
    Request,
    Text,
    ToolUse,
    Turn,
)

# Tokens the stand-in reports per call (usageMetadata): fixed, so a test can tell the
# CLI's own records of them from anything estimated.
PROMPT_TOKENS = 1200
CACHED_TOKENS = 200
OUTPUT_TOKENS = 30
THOUGHT_TOKENS = 5


def shell(command: str, description: str = "scripted command") -> ToolUse:
    """A run_shell_command call as Gemini CLI's shell tool expects it."""
    return ToolUse("run_shell_command", {"command": command, "description": description})


# --- predicates over Gemini requests ------------------------------------------------------


def last_user_parts(request: Request) -> list[dict[str, Any]]:
    """The parts of the last user turn (a prompt, or the answers to function calls)."""
    for content in reversed(request.get("contents") or []):
        if isinstance(content, dict) and content.get("role") == "user":
            return [p for p in content.get("parts") or [] if isinstance(p, dict)]
    return []


def last_user_texts(request: Request) -> list[str]:
    """Every text in the last user turn: plain text parts and each function response
    (as JSON: the tool's output or error is in there)."""
    texts = []
    for part in last_user_parts(request):
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("functionResponse"), dict):
            texts.append(json.dumps(part["functionResponse"], ensure_ascii=False))
    return texts


def user_says(needle: str) -> Predicate:
    return lambda request: any(needle in text for text in last_user_texts(request))


def function_responses(request: Request) -> list[dict[str, Any]]:
    """The function responses in the last user turn: {name, response, id?} each."""
    return [
        p["functionResponse"]
        for p in last_user_parts(request)
        if isinstance(p.get("functionResponse"), dict)
    ]


def has_tool_result() -> Predicate:
    return lambda request: bool(function_responses(request))


def tool_result_says(needle: str) -> Predicate:
    return lambda request: any(
        needle in json.dumps(r, ensure_ascii=False) for r in function_responses(request)
    )


def all_texts(request: Request) -> str:
    """Everything the request tells the model (system instruction and every turn), as
    one string to search."""
    return json.dumps(
        [request.get("systemInstruction"), request.get("contents")], ensure_ascii=False
    )


# --- the Claude-shaped view -------------------------------------------------------------

# Claude Code's tools and the Gemini CLI tool that takes the same input.
GEMINI_TOOLS = {"Bash": "run_shell_command", "Write": "write_file", "Read": "read_file"}
CLAUDE_TOOLS = {gemini: claude for claude, gemini in GEMINI_TOOLS.items()}
# How Gemini's shell tool reports a command's output to the model.
_SHELL_OUTPUT = re.compile(
    r"\A<untrusted_context>\nOutput: (.*?)\n(?:Exit Code: -?\d+\n)?"
    r"(?:Process Group PGID: \d+\n)?</untrusted_context>\Z",
    re.S,
)


def claude_view(request: Request) -> Request:
    """`request` with `messages` added: its `contents` as Anthropic's Messages API would
    carry them (text blocks, tool_use and tool_result blocks paired by id, a shell
    call's result as the command's own output)."""
    messages = []
    for content in request.get("contents") or []:
        if not isinstance(content, dict):
            continue
        blocks: list[dict[str, Any]] = []
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                blocks.append({"type": "text", "text": part["text"]})
            elif isinstance(call := part.get("functionCall"), dict):
                name = str(call.get("name", ""))
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": CLAUDE_TOOLS.get(name, name),
                        "input": call.get("args") or {},
                    }
                )
            elif isinstance(answer := part.get("functionResponse"), dict):
                response = answer.get("response") or {}
                error = isinstance(response, dict) and "error" in response
                text = (
                    str(response.get("error" if error else "output", ""))
                    if isinstance(response, dict)
                    else json.dumps(response)
                )
                shown = _SHELL_OUTPUT.match(text)
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": answer.get("id"),
                        "content": shown.group(1) if shown else text,
                        "is_error": error,
                    }
                )
        role = "assistant" if content.get("role") == "model" else "user"
        messages.append({"role": role, "content": blocks})
    return {**request, "messages": messages}


# --- wire shapes ---------------------------------------------------------------------


def _parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in turn.blocks:
        if isinstance(block, Text):
            mid = len(block.text) // 2
            # Two chunks per text, so a client that keeps only one is caught.
            parts += [{"text": t} for t in (block.text[:mid], block.text[mid:]) if t]
        else:
            name = GEMINI_TOOLS.get(block.name, block.name)
            parts.append({"functionCall": {"name": name, "args": block.input}})
    return parts


def usage_metadata() -> dict[str, int]:
    return {
        "promptTokenCount": PROMPT_TOKENS,
        "cachedContentTokenCount": CACHED_TOKENS,
        "candidatesTokenCount": OUTPUT_TOKENS,
        "thoughtsTokenCount": THOUGHT_TOKENS,
        "totalTokenCount": PROMPT_TOKENS + OUTPUT_TOKENS + THOUGHT_TOKENS,
    }


def stream_chunks(turn: Turn, model: str) -> list[dict[str, Any]]:
    """The SSE chunks of one scripted turn: one part per chunk, the last one carrying
    the finish reason and the call's usage, as the API sends them."""
    parts = _parts(turn) or [{"text": ""}]
    chunks = []
    for i, part in enumerate(parts):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
        if i == len(parts) - 1:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = usage_metadata()
        chunks.append(chunk)
    return chunks


def encode_sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: %s\r\n\r\n" % msgspec.json.encode(c) for c in chunks)


def fill_schema(schema: Any) -> Any:
    """A value matching a response schema (Gemini's OBJECT/STRING/... or JSON Schema's
    lower-case types): every required property present, enums take "user" when offered
    (the next-speaker check then hands the turn back), numbers are 1."""
    if not isinstance(schema, dict):
        return ""
    kind = str(schema.get("type") or "").lower()
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        choices = schema["enum"]
        return "user" if "user" in choices else choices[0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: fill_schema(props.get(name)) for name in schema.get("required") or props}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "scripted"


def side_answer(request: Request) -> dict[str, Any]:
    config = request.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    text = json.dumps(fill_schema(schema)) if schema else "Scripted session"
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
    }


# --- the server ----------------------------------------------------------------------


class ScriptedGemini(ScriptedModel):
    """The scripted Gemini API. `start()` returns the base URL to put in
    GOOGLE_GEMINI_BASE_URL; `requests` holds every request seen, oldest first."""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def wait_for(
        self, predicate: Callable[[RecordedRequest], bool], timeout: float = 60.0
    ) -> RecordedRequest:
        # Gemini asks its side questions (router, next speaker) before each turn.
        return super().wait_for(predicate, timeout)


def _model_of(path: str) -> str:
    # /v1beta/models/<model>:<method>?...
    name = path.split("?", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0] or "gemini-scripted"


def _handler_for(model: ScriptedGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(RecordingHandler):
        def do_GET(self) -> None:
            self._record(None, "other", None)
            self._send_json(200, b"{}")

        def do_POST(self) -> None:
            body = self._body()
            path = self.path.split("?", 1)[0]
            if not isinstance(body, dict):
                self._record(body, "other", None)
                self._send_json(200, b"{}")
            elif path.endswith(":streamGenerateContent") and body.get("tools"):
                self._main(body)
            elif path.endswith((":generateContent", ":streamGenerateContent")):
                self._record(body, "side", None)
                answer = side_answer(body)
                if path.endswith(":streamGenerateContent"):
                    self._send_sse(encode_sse([answer]))
                else:
                    self._send_json(200, msgspec.json.encode(answer))
            elif path.endswith(":countTokens"):
                self._record(body, "other", None)
                self._send_json(200, b'{"totalTokens": 100}')
            else:
                self._record(body, "other", None)
                self._send_json(200, b"{}")

        def _main(self, body: Request) -> None:
            turn, index = model.scenario.respond(claude_view(body))
            self._record(body, "main", index)
            if turn.delay:
                time.sleep(turn.delay)
            if turn.error is not None:
                error = {
                    "error": {
                        "code": turn.error.status,
                        "message": turn.error.message,
                        "status": "RESOURCE_EXHAUSTED",
                    }
                }
                self._send_json(turn.error.status, msgspec.json.encode(error))
                return
            self._send_sse(encode_sse(stream_chunks(turn, _model_of(self.path))))

    Handler.model = model
    return Handler
