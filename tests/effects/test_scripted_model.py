"""The scripted Messages API, spoken to over real HTTP the way an SDK client would."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from hive_core.demo.scripted_model import (
    Scenario,
    ScriptedModel,
    ToolUse,
    bash,
    has_tool_result,
    last_user_texts,
    turn,
    user_says,
)

TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]


def body(text: str, *, tools: bool = True, stream: bool = True, **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        **extra,
    }
    if tools:
        request["tools"] = TOOLS
    return request


def connect(base_url: str) -> http.client.HTTPConnection:
    url = urlsplit(base_url)
    return http.client.HTTPConnection(url.netloc, timeout=10)


def post(base_url: str, path: str, payload: Any) -> tuple[int, dict[str, str], bytes]:
    conn = connect(base_url)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(payload),
            headers={
                "content-type": "application/json",
                "x-api-key": "k",
                "anthropic-version": "v",
            },
        )
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def sse_events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs, checking that each event's name matches its data type."""
    events = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = json.loads(fields["data"])
        assert fields["event"] == data["type"]
        events.append((fields["event"], data))
    return events


def assemble(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Rebuild the final message from its stream, as the SDK's accumulator does."""
    message: dict[str, Any] = {}
    partial_json: dict[int, str] = {}
    for name, data in events:
        if name == "message_start":
            message = data["message"]
        elif name == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta"
                partial_json[data["index"]] = (
                    partial_json.get(data["index"], "") + delta["partial_json"]
                )
        elif name == "content_block_stop" and data["index"] in partial_json:
            message["content"][data["index"]]["input"] = json.loads(partial_json[data["index"]])
        elif name == "message_delta":
            message["stop_reason"] = data["delta"]["stop_reason"]
            message["usage"].update(data["usage"])
    return message


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    scenario = Scenario(
        [
            turn(user_says("hello"), "Hi there, friend."),
            turn(user_says("mail"), "Checking mail.", bash("hive inbox")),
            turn(has_tool_result(), "Inbox is empty."),
        ]
    )
    with ScriptedModel(scenario) as server:
        yield server


def test_binds_loopback_on_an_ephemeral_port(model: ScriptedModel) -> None:
    url = urlsplit(model.base_url)
    assert url.hostname == "127.0.0.1"
    assert url.port and url.port > 0


def test_streams_a_text_turn_as_sse(model: ScriptedModel) -> None:
    status, headers, raw = post(model.base_url, "/v1/messages?beta=true", body("hello"))

    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(raw)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 1
    message = assemble(events)
    assert message["role"] == "assistant"
    assert message["model"] == "claude-test"
    assert message["content"] == [{"type": "text", "text": "Hi there, friend."}]
    assert message["stop_reason"] == "end_turn"


def test_streams_a_tool_use_turn_with_json_deltas(model: ScriptedModel) -> None:
    post(model.base_url, "/v1/messages", body("hello"))
    _, _, raw = post(model.base_url, "/v1/messages", body("any mail?"))

    events = sse_events(raw)
    starts = [data["content_block"] for name, data in events if name == "content_block_start"]
    assert starts[1]["type"] == "tool_use" and starts[1]["input"] == {}
    deltas = [d["delta"] for n, d in events if n == "content_block_delta" and d["index"] == 1]
    assert {d["type"] for d in deltas} == {"input_json_delta"} and len(deltas) > 1
    message = assemble(events)
    text, tool = message["content"]
    assert text == {"type": "text", "text": "Checking mail."}
    assert tool["name"] == "Bash"
    assert tool["input"]["command"] == "hive inbox"
    assert tool["id"].startswith("toolu_")
    assert message["stop_reason"] == "tool_use"


def test_non_streaming_request_gets_one_message(model: ScriptedModel) -> None:
    status, headers, raw = post(model.base_url, "/v1/messages", body("hello", stream=False))
    assert status == 200 and headers["Content-Type"] == "application/json"
    message = json.loads(raw)
    assert message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": "Hi there, friend."}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["input_tokens"] > 0


def test_turns_play_in_order_and_unmatched_main_requests_get_the_fallback(
    model: ScriptedModel,
) -> None:
    _, _, raw = post(model.base_url, "/v1/messages", body("any mail?", stream=False))
    assert json.loads(raw)["content"][0]["text"].startswith("Nothing scripted")
    assert model.scenario.played == 0

    post(model.base_url, "/v1/messages", body("hello", stream=False))
    assert model.scenario.played == 1
    assert [r.turn for r in model.requests] == [None, 0]


def test_side_requests_do_not_consume_turns(model: ScriptedModel) -> None:
    # The CLI's side requests (the session title) send no tools, or an empty list.
    for side in (
        body("hello", tools=False, stream=False),
        {**body("hello", stream=False), "tools": []},
    ):
        _, _, raw = post(model.base_url, "/v1/messages", side)
        assert json.loads(raw)["content"][0]["text"] == model.scenario.side_reply
    assert model.scenario.played == 0

    post(model.base_url, "/v1/messages", body("hello"))
    assert [r.kind for r in model.requests] == ["side", "side", "main"]
    assert model.scenario.played == 1


def test_side_request_asking_for_json_gets_json(model: ScriptedModel) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    request = body(
        "name this session",
        tools=False,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    message = assemble(sse_events(post(model.base_url, "/v1/messages", request)[2]))
    assert json.loads(message["content"][0]["text"]) == {"title": model.scenario.side_reply}


def test_every_request_is_recorded(model: ScriptedModel) -> None:
    post(model.base_url, "/v1/messages?beta=true", body("hello"))
    status, _, raw = post(model.base_url, "/v1/messages/count_tokens", body("hello"))
    assert status == 200 and json.loads(raw)["input_tokens"] > 0
    conn = connect(model.base_url)
    conn.request("HEAD", "/")
    assert conn.getresponse().status == 200
    conn.close()

    recorded = model.requests
    assert [(r.method, r.path) for r in recorded] == [
        ("POST", "/v1/messages?beta=true"),
        ("POST", "/v1/messages/count_tokens"),
        ("HEAD", "/"),
    ]
    first = recorded[0]
    assert first.headers["x-api-key"] == "k"
    assert last_user_texts(first.body) == ["hello"]
    assert first.kind == "main" and first.turn == 0


def test_wait_for_sees_future_requests_and_times_out(model: ScriptedModel) -> None:
    timer = threading.Timer(0.2, post, (model.base_url, "/v1/messages", body("hello")))
    timer.start()
    seen = model.wait_for(lambda r: r.turn == 0, timeout=5)
    timer.join()
    assert seen.path == "/v1/messages"
    with pytest.raises(TimeoutError):
        model.wait_for(lambda r: r.turn == 2, timeout=0.2)


def test_match_covers_every_text_block_and_tool_results() -> None:
    request = {
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": "out"}],
                    },
                    {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                    {"type": "text", "text": "Stop hook feedback:\nYou have mail"},
                ],
            },
            # The CLI appends mid-conversation system messages after the user turn.
            {"role": "system", "content": "hook context"},
        ],
    }
    assert user_says("You have mail")(request)
    assert user_says("out")(request)
    assert not user_says("first")(request)
    assert has_tool_result()(request)


def test_tool_use_ids_are_unique() -> None:
    assert ToolUse("Bash", {}).id != ToolUse("Bash", {}).id


def test_restart_and_stop_are_idempotent() -> None:
    server = ScriptedModel(Scenario([]))
    url = server.start()
    assert server.start() == url
    server.stop()
    server.stop()
    with pytest.raises(RuntimeError):
        _ = server.base_url
