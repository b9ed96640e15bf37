"""A scripted OpenAI Responses API on 127.0.0.1, for Codex desks in tests and the bench.

The same `Scenario` of turns as the Messages stand-in (scenario.py) answers POST
`/v1/responses`, streamed as the Responses API streams it (SSE: `response.created`,
`response.output_item.added`, text and function-call argument deltas,
`response.output_item.done`, then `response.completed` carrying the usage). A `Text`
block is an assistant message item, a `ToolUse` a `function_call` item (`input` sent as
its JSON `arguments`). Predicates here read the Responses request shape: its `input` is
a list of items (user messages with `input_text` parts, `function_call_output` items with
what the tool returned); a scenario written for the Messages stand-in reads them
through `claude_view`, and its `Bash` calls become Codex's shell calls. GET `/v1/models` answers an empty model list; anything else an
empty JSON object. Every request is recorded, as ScriptedModel records them.

scenario = Scenario([
    turn(input_says("check mail"), "Checking.", shell("hive inbox")),
    turn(call_output_says("inbox"), "Done."),
])
with ScriptedResponses(scenario) as model:
    env = {"OPENAI_BASE_URL": model.base_url + "/v1", "OPENAI_API_KEY": "sk-..."}
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import msgspec

from hive_core.demo.scripted_model.anthropic import RecordedRequest, RecordingHandler, ScriptedModel
from hive_core.demo.scripted_model.scenario import (
    Predicate,
    Request,
    Scenario,
    Text,
    ToolUse,
    Turn,
)

# Codex 0.169's shell tool for the gpt-5.1-codex family (`exec_command`: one command
# line run in a PTY in the session's folder). Its default model (gpt-6.1-sol) offers only
# a JavaScript `exec` tool instead, which a script cannot drive plainly.
SHELL_TOOL = "exec_command"
MODEL = "gpt-5.1-codex"

_ids = itertools.count(1)


# Codex's default model (gpt-6.1-sol) calls its tools from JavaScript: a freeform
# `exec` tool (a `custom_tool_call` item whose `input` is the script), in which
# `await tools.exec_command({cmd})` runs a shell command.
CODE_TOOL = "exec"
DEFAULT_MODEL = "gpt-6.1-sol"


def code(script: str) -> ToolUse:
    """A call of Codex's JavaScript `exec` tool (its default model's only way to act)."""
    return ToolUse(CODE_TOOL, {"input": script})


def code_shell(command: str) -> ToolUse:
    """A shell command run from Codex's `exec` tool, its output returned as text."""
    cmd = msgspec.json.encode(command).decode()
    return code(f"const r = await tools.exec_command({{cmd: {cmd}}}); text(JSON.stringify(r));")


def shell(command: str) -> ToolUse:
    """A call of Codex's shell tool."""
    return ToolUse(SHELL_TOOL, {"cmd": command, "login": False, "yield_time_ms": 10000})


# --- predicates over a Responses request ----------------------------------------------

# What answers a tool call in the input: a function's output, or the `exec` tool's.
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def _json_schema(request: Request) -> dict[str, Any] | None:
    fmt = (request.get("text") or {}).get("format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    return schema if isinstance(schema, dict) else None


def is_conversation(request: Request) -> bool:
    """The agent's own turn: it offers tools (as `tools`, or as an `additional_tools`
    input item) and asks for no structured answer (the session title asks for JSON)."""
    items = request.get("input") or []
    offers = bool(request.get("tools")) or any(
        isinstance(i, dict) and i.get("type") == "additional_tools" for i in items
    )
    return offers and _json_schema(request) is None


def _last_user_turn(request: Request) -> list[dict[str, Any]]:
    """The input items after the last assistant output: the user's message and the tool
    outputs answering the model's last calls (what this request adds)."""
    items = [i for i in request.get("input") or [] if isinstance(i, dict)]
    tail: list[dict[str, Any]] = []
    for item in reversed(items):
        if item.get("type") in ("function_call", "custom_tool_call", "reasoning") or (
            item.get("type") == "message" and item.get("role") == "assistant"
        ):
            break
        tail.append(item)
    return tail[::-1]


def item_texts(item: dict[str, Any]) -> list[str]:
    """The texts of one input item: a message's text parts, a tool output's text."""
    if item.get("type") in _OUTPUTS:
        output = item.get("output")
        if isinstance(output, str):
            return [output]
        if isinstance(output, list):
            return [str(p.get("text", "")) for p in output if isinstance(p, dict)]
        return []
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [str(p.get("text", "")) for p in content or [] if isinstance(p, dict) and "text" in p]


def last_input_texts(request: Request) -> list[str]:
    """Every text the request adds since the model last spoke: the user's message (with
    any context the CLI or its hooks put beside it) and the tool outputs."""
    return [text for item in _last_user_turn(request) for text in item_texts(item)]


def input_says(needle: str) -> Predicate:
    return lambda request: any(needle in text for text in last_input_texts(request))


def has_call_output() -> Predicate:
    """The request answers a function call of the model (the tool ran, or was refused)."""
    return lambda request: any(item.get("type") in _OUTPUTS for item in _last_user_turn(request))


def call_output_says(needle: str) -> Predicate:
    answered = has_call_output()
    return lambda request: answered(request) and input_says(needle)(request)


def call_outputs(request: Request) -> list[str]:
    """The outputs of the model's tool calls this request answers."""
    return [
        text
        for item in _last_user_turn(request)
        if item.get("type") in _OUTPUTS
        for text in item_texts(item)
    ]


# --- a scenario written for the Messages stand-in ------------------------------------

# Codex's tool output wraps the command's own: "Chunk ID ... Output:\n<output>".
_SHELL_OUTPUT = re.compile(r"\AChunk ID: .*?\nOutput:\n(.*)\Z", re.S)


def claude_view(request: Request) -> Request:
    """`request` with `messages` added: its `input` as Anthropic's Messages API would
    carry it (user and developer texts as user text blocks, the model's texts and calls
    as assistant blocks, a call's output as the tool_result paired by its call id, a
    shell call's as the command's own output). A scenario written for the Messages
    stand-in (the demo's brains) reads Codex's requests through it."""
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in request.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            role = "assistant" if item.get("role") == "assistant" else "user"
            for text in item_texts(item):
                add(role, {"type": "text", "text": text})
        elif kind == "function_call":
            try:
                arguments = msgspec.json.decode(str(item.get("arguments") or "{}"))
            except msgspec.DecodeError:
                arguments = {}
            name = str(item.get("name", ""))
            if name == SHELL_TOOL and isinstance(arguments, dict):
                name, arguments = "Bash", {"command": arguments.get("cmd", "")}
            add(
                "assistant",
                {"type": "tool_use", "id": item.get("call_id"), "name": name, "input": arguments},
            )
        elif kind == "function_call_output":
            text = "\n".join(item_texts(item))
            shown = _SHELL_OUTPUT.match(text)
            add(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": item.get("call_id"),
                    "content": shown.group(1) if shown else text,
                },
            )
    return {**request, "messages": messages}


# --- wire shapes ----------------------------------------------------------------------


class OutputText(msgspec.Struct, tag_field="type", tag="output_text"):
    text: str
    annotations: list[Any] = []


class MessageItem(msgspec.Struct, tag_field="type", tag="message"):
    id: str
    content: list[OutputText]
    status: str = "completed"
    role: str = "assistant"


class FunctionCallItem(msgspec.Struct, tag_field="type", tag="function_call"):
    id: str
    call_id: str
    name: str
    arguments: str
    status: str = "completed"


class CustomToolCallItem(msgspec.Struct, tag_field="type", tag="custom_tool_call"):
    id: str
    call_id: str
    name: str
    input: str
    status: str = "completed"


Item = MessageItem | FunctionCallItem | CustomToolCallItem


class InputDetails(msgspec.Struct):
    cached_tokens: int = 0


class OutputDetails(msgspec.Struct):
    reasoning_tokens: int = 0


class ResponseUsage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputDetails
    output_tokens_details: OutputDetails


class Response(msgspec.Struct):
    id: str
    created_at: int
    model: str
    status: str
    output: list[Item]
    usage: ResponseUsage | None = None
    object: str = "response"


# Usage every scripted turn reports: fixed, so a test can add it up.
INPUT_TOKENS = 1000
CACHED_TOKENS = 200
OUTPUT_TOKENS = 30


def _usage() -> ResponseUsage:
    return ResponseUsage(
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
        total_tokens=INPUT_TOKENS + OUTPUT_TOKENS,
        input_tokens_details=InputDetails(cached_tokens=CACHED_TOKENS),
        output_tokens_details=OutputDetails(),
    )


def _items(turn: Turn) -> list[Item]:
    n = next(_ids)
    items: list[Item] = []
    for i, block in enumerate(turn.blocks):
        if isinstance(block, ToolUse) and block.name == CODE_TOOL:
            script = str(block.input.get("input", ""))
            items.append(CustomToolCallItem(f"ctc_{n:05d}_{i}", block.id, CODE_TOOL, script))
        elif isinstance(block, ToolUse):
            name, given = block.name, block.input
            if name == "Bash":  # a Messages-API scenario's shell call: Codex's own
                name, given = SHELL_TOOL, shell(str(given.get("command", ""))).input
            arguments = msgspec.json.encode(given).decode()
            items.append(FunctionCallItem(f"fc_{n:05d}_{i}", block.id, name, arguments))
        elif isinstance(block, Text):
            items.append(MessageItem(f"msg_{n:05d}_{i}", [OutputText(block.text)]))
    return items


def _halves(text: str) -> list[str]:
    # Two deltas per item, so a client that only handles a single delta is caught.
    mid = len(text) // 2
    return [part for part in (text[:mid], text[mid:]) if part]


def stream_events(turn: Turn, request: Request) -> Iterator[dict[str, Any]]:
    """The SSE events of one scripted turn, in the order the Responses API sends them."""
    items = _items(turn)
    response = Response(
        id=f"resp_scripted_{next(_ids):06d}",
        created_at=int(time.time()),
        model=str(request.get("model") or "gpt-scripted"),
        status="in_progress",
        output=[],
    )
    encode = msgspec.to_builtins
    yield {"type": "response.created", "response": encode(response)}
    yield {"type": "response.in_progress", "response": encode(response)}
    for index, item in enumerate(items):
        if isinstance(item, FunctionCallItem):
            started = msgspec.structs.replace(item, arguments="", status="in_progress")
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": encode(started),
            }
            for part in _halves(item.arguments):
                yield {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item.id,
                    "output_index": index,
                    "delta": part,
                }
            yield {
                "type": "response.function_call_arguments.done",
                "item_id": item.id,
                "output_index": index,
                "arguments": item.arguments,
            }
        elif isinstance(item, CustomToolCallItem):
            started_call = msgspec.structs.replace(item, input="", status="in_progress")
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": encode(started_call),
            }
        else:
            text = item.content[0].text
            started_msg = msgspec.structs.replace(item, content=[], status="in_progress")
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": encode(started_msg),
            }
            where = {"item_id": item.id, "output_index": index, "content_index": 0}
            yield {"type": "response.content_part.added", **where, "part": encode(OutputText(""))}
            for part in _halves(text):
                yield {"type": "response.output_text.delta", **where, "delta": part}
            yield {"type": "response.output_text.done", **where, "text": text}
            yield {"type": "response.content_part.done", **where, "part": encode(OutputText(text))}
        yield {"type": "response.output_item.done", "output_index": index, "item": encode(item)}
    done = msgspec.structs.replace(response, status="completed", output=items, usage=_usage())
    yield {"type": "response.completed", "response": encode(done)}


def encode_sse(events: Iterator[dict[str, Any]]) -> bytes:
    encoder = msgspec.json.Encoder()
    chunks = []
    for number, event in enumerate(events):
        event["sequence_number"] = number
        chunks.append(b"event: %s\ndata: %s\n\n" % (event["type"].encode(), encoder.encode(event)))
    return b"".join(chunks)


# --- the server -----------------------------------------------------------------------


class ScriptedResponses(ScriptedModel):
    """The scripted Responses API. `base_url` + "/v1" is what OPENAI_BASE_URL (or a
    model provider's `base_url`) takes."""

    def __init__(self, scenario: Scenario) -> None:
        scenario.main = is_conversation
        super().__init__(scenario)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    @property
    def response_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind in ("main", "side")]


def _handler_for(model: ScriptedResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(RecordingHandler):
        def do_GET(self) -> None:
            self._record(None, "other", None)
            path = self.path.split("?", 1)[0]
            if path.endswith("/responses"):
                # Codex tries the Responses API over a WebSocket first; 426 sends it to
                # plain HTTP streaming at once.
                self.send_response(426)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._send_json(200, b'{"models": []}' if path.endswith("/models") else b"{}")

        def do_POST(self) -> None:
            body = self._body()
            path = self.path.split("?", 1)[0]
            if path.endswith("/responses") and isinstance(body, dict):
                self._respond(body)
            else:
                self._record(body, "other", None)
                self._send_json(200, b"{}")

        def _respond(self, body: Request) -> None:
            turn, index = model.scenario.respond(claude_view(body))
            main = is_conversation(body)
            self._record(body, "main" if main else "side", index)
            schema = _json_schema(body)
            if not main and schema is not None:
                # The title request: an object with every property it names.
                names = schema.get("required") or schema.get("properties") or []
                reply = {name: model.scenario.side_reply for name in names}
                turn = Turn(turn.match, (Text(msgspec.json.encode(reply).decode()),), "side")
            if turn.delay:
                time.sleep(turn.delay)
            if turn.error is not None:
                payload = msgspec.json.encode(
                    {"error": {"type": turn.error.type, "message": turn.error.message}}
                )
                self._send_json(turn.error.status, payload)
                return
            self._send_sse(encode_sse(stream_events(turn, body)))

    Handler.model = model
    return Handler
