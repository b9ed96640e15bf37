"""A scripted Anthropic Messages API on 127.0.0.1, for tests and the demo.

POST /v1/messages answers from a `Scenario`, as SSE when the request asks for
`stream: true` and as one JSON message otherwise. Everything else an agent CLI asks at
start-up gets a harmless answer (count_tokens a token count, any other path an empty
JSON object), so the CLI never waits on a real network. Every request is recorded.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

import msgspec

from hive_core.demo.scripted_model.scenario import ApiError, Request, Scenario, Text, ToolUse, Turn

# --- wire shapes (the subset of the Messages API the CLI reads) ------------------------


class Usage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class TextBlock(msgspec.Struct, tag_field="type", tag="text"):
    text: str


class ToolUseBlock(msgspec.Struct, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


class Message(msgspec.Struct, tag_field="type", tag="message"):
    id: str
    model: str
    content: list[TextBlock | ToolUseBlock]
    stop_reason: str | None
    usage: Usage
    role: str = "assistant"
    stop_sequence: None = None


class MessageStart(msgspec.Struct, tag_field="type", tag="message_start"):
    message: Message


class Ping(msgspec.Struct, tag_field="type", tag="ping"):
    pass


class ContentBlockStart(msgspec.Struct, tag_field="type", tag="content_block_start"):
    index: int
    content_block: TextBlock | ToolUseBlock


class TextDelta(msgspec.Struct, tag_field="type", tag="text_delta"):
    text: str


class InputJsonDelta(msgspec.Struct, tag_field="type", tag="input_json_delta"):
    partial_json: str


class ContentBlockDelta(msgspec.Struct, tag_field="type", tag="content_block_delta"):
    index: int
    delta: TextDelta | InputJsonDelta


class ContentBlockStop(msgspec.Struct, tag_field="type", tag="content_block_stop"):
    index: int


class MessageDeltaBody(msgspec.Struct):
    stop_reason: str
    stop_sequence: None = None


class OutputUsage(msgspec.Struct):
    output_tokens: int


class MessageDelta(msgspec.Struct, tag_field="type", tag="message_delta"):
    delta: MessageDeltaBody
    usage: OutputUsage


class MessageStop(msgspec.Struct, tag_field="type", tag="message_stop"):
    pass


class TokenCount(msgspec.Struct):
    input_tokens: int


StreamEvent = (
    MessageStart
    | Ping
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
)


# --- recording ------------------------------------------------------------------------


Kind = Literal["main", "side", "other"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    # The decoded JSON body; None for a request without one (or not JSON).
    body: Any
    kind: Kind
    # Index of the scenario turn this request consumed, if any.
    turn: int | None
    at: float


# --- building replies -----------------------------------------------------------------

_message_ids = itertools.count(1)


def _estimate_tokens(request: Request) -> int:
    # The CLI shows usage and decides on auto-compaction from it; a small, stable count
    # keeps both quiet.
    return 100 + len(request.get("messages") or []) * 10


def _wire_blocks(turn: Turn) -> list[TextBlock | ToolUseBlock]:
    return [
        TextBlock(b.text) if isinstance(b, Text) else ToolUseBlock(b.id, b.name, b.input)
        for b in turn.blocks
    ]


def build_message(turn: Turn, request: Request) -> Message:
    return Message(
        id=f"msg_scripted_{next(_message_ids):06d}",
        model=str(request.get("model") or "claude-scripted"),
        content=_wire_blocks(turn),
        stop_reason=turn.stop_reason,
        usage=Usage(input_tokens=_estimate_tokens(request), output_tokens=10),
    )


def _halves(text: str) -> list[str]:
    # Two deltas per block, so a client that only handles a single delta is caught.
    mid = len(text) // 2
    return [part for part in (text[:mid], text[mid:]) if part]


def stream_events(turn: Turn, request: Request) -> Iterator[StreamEvent]:
    """The SSE events of one scripted turn, in the order the real API sends them."""
    final = build_message(turn, request)
    yield MessageStart(
        msgspec.structs.replace(
            final,
            content=[],
            stop_reason=None,
            usage=msgspec.structs.replace(final.usage, output_tokens=1),
        )
    )
    yield Ping()
    for index, block in enumerate(turn.blocks):
        if isinstance(block, ToolUse):
            yield ContentBlockStart(index, ToolUseBlock(block.id, block.name, {}))
            payload = msgspec.json.encode(block.input).decode()
            for part in _halves(payload):
                yield ContentBlockDelta(index, InputJsonDelta(part))
        else:
            yield ContentBlockStart(index, TextBlock(""))
            for part in _halves(block.text):
                yield ContentBlockDelta(index, TextDelta(part))
        yield ContentBlockStop(index)
    yield MessageDelta(MessageDeltaBody(turn.stop_reason), OutputUsage(final.usage.output_tokens))
    yield MessageStop()


def encode_sse(events: Iterator[StreamEvent]) -> bytes:
    encoder = msgspec.json.Encoder()
    chunks = []
    for event in events:
        name = str(type(event).__struct_config__.tag).encode()
        chunks.append(b"event: %s\ndata: %s\n\n" % (name, encoder.encode(event)))
    return b"".join(chunks)


# --- the server -----------------------------------------------------------------------


class ScriptedModel:
    """The scripted API server. `start()` returns the base URL to put in
    ANTHROPIC_BASE_URL; `requests` holds every request seen, oldest first."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._requests: list[RecordedRequest] = []
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._changed:
            return list(self._requests)

    @property
    def main_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "main"]

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("ScriptedModel is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> str:
        if self._server is not None:
            return self.base_url
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            # shutdown() waits out one poll; the default half second adds up over a suite.
            kwargs={"poll_interval": 0.05},
            name="scripted-model",
            daemon=True,
        )
        self._thread.start()
        return self.base_url

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler: the Messages API here; a subclass speaks another
        protocol (responses.py) over the same recording."""
        return _handler_for(self)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModel:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def wait_for(
        self, predicate: Callable[[RecordedRequest], bool], timeout: float = 30.0
    ) -> RecordedRequest:
        """The first recorded request (past or future) satisfying `predicate`; raises
        TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for request in self._requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no matching request within {timeout} s; "
                        f"saw {[(r.method, r.path, r.kind, r.turn) for r in self._requests]}"
                    )
                self._changed.wait(remaining)

    def _record(self, request: RecordedRequest) -> None:
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()


class RecordingHandler(BaseHTTPRequestHandler):
    """What every scripted API's request handler shares: HTTP/1.1 (so the CLI's keep-alive
    connections are served, not reset), no log lines (requests are recorded; stderr noise
    would only clutter test output), the JSON body, the replies, and the recording.
    `model` is the server a handler class is made for (`_handler_for` in each protocol)."""

    protocol_version = "HTTP/1.1"
    model: ScriptedModel

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _body(self) -> Any:
        """The request's JSON body; None when there is none or it is not JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            return None

    def _send(
        self, status: int, content_type: str, payload: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, payload: bytes) -> None:
        self._send(status, "application/json", payload)

    def _send_sse(self, payload: bytes) -> None:
        self._send(200, "text/event-stream; charset=utf-8", payload, {"Cache-Control": "no-cache"})

    def _record(self, body: Any, kind: Kind, turn: int | None) -> None:
        self.model._record(
            RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                kind=kind,
                turn=turn,
                at=time.time(),
            )
        )


def _handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(RecordingHandler):
        def do_HEAD(self) -> None:
            self._record(None, "other", None)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._record(None, "other", None)
            self._send_json(200, b"{}")

        def do_POST(self) -> None:
            body = self._body()
            path = self.path.split("?", 1)[0]
            if path == "/v1/messages" and isinstance(body, dict):
                self._messages(body)
            elif path == "/v1/messages/count_tokens" and isinstance(body, dict):
                self._record(body, "other", None)
                self._send_json(200, msgspec.json.encode(TokenCount(_estimate_tokens(body))))
            else:
                self._record(body, "other", None)
                self._send_json(200, b"{}")

        def _messages(self, body: Request) -> None:
            turn, index = model.scenario.respond(body)
            self._record(body, "main" if body.get("tools") else "side", index)
            if turn.delay:
                time.sleep(turn.delay)
            if turn.error is not None:
                self._send_error(turn.error)
            elif body.get("stream"):
                self._send_sse(encode_sse(stream_events(turn, body)))
            else:
                self._send_json(200, msgspec.json.encode(build_message(turn, body)))

        def _send_error(self, error: ApiError) -> None:
            payload = msgspec.json.encode(
                {"type": "error", "error": {"type": error.type, "message": error.message}}
            )
            # The CLI would otherwise retry a 429 with backoff for minutes.
            retry = (
                {"x-should-retry": "false"}
                if error.retry_after is None
                else {"retry-after": str(error.retry_after)}
            )
            self._send(error.status, "application/json", payload, retry)

    Handler.model = model
    return Handler
