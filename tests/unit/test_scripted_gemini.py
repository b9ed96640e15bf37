"""The scripted Gemini API's pure parts: the Claude-shaped view a scenario reads, the
streamed chunks, and the side answers that must fit the CLI's response schemas."""

from __future__ import annotations

import json

from hive_core.demo.brains import WorkerBrain, inbox_of, last_tool_call
from hive_core.demo.scripted_model import Text, ToolUse, bash, turn, user_says
from hive_core.demo.scripted_model.gemini import (
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    claude_view,
    encode_sse,
    fill_schema,
    side_answer,
    stream_chunks,
)

INBOX = [{"id": "m-1", "from": "michael", "subject": "t1", "act": "request"}]
# A request as gemini 0.61.0 sent it after a shell call (parts as recorded).
REQUEST = {
    "contents": [
        {"role": "user", "parts": [{"text": "<session_context>...</session_context>"}]},
        {"role": "user", "parts": [{"text": "You have 1 unread message. Run hive inbox."}]},
        {
            "role": "model",
            "parts": [
                {"text": "Reading."},
                {
                    "functionCall": {
                        "id": "run_shell_command_1_0",
                        "name": "run_shell_command",
                        "args": {"command": "hive inbox --json", "description": "mail"},
                    },
                    "thoughtSignature": "skip_thought_signature_validator",
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "run_shell_command_1_0",
                        "name": "run_shell_command",
                        "response": {
                            "output": "<untrusted_context>\nOutput: "
                            + json.dumps(INBOX)
                            + "\nProcess Group PGID: 4242\n</untrusted_context>"
                        },
                    }
                }
            ],
        },
    ],
    "tools": [{"functionDeclarations": []}],
}


def test_a_claude_scenario_reads_gemini_requests_through_the_view() -> None:
    view = claude_view(REQUEST)
    assert view["contents"] == REQUEST["contents"]
    assert [m["role"] for m in view["messages"]] == ["user", "user", "assistant", "user"]
    call = last_tool_call(view)
    assert call is not None and call[0] == "hive inbox --json"
    assert inbox_of(call[1]) == INBOX  # the shell's wrapper is gone: the command's output
    assert user_says("Run hive inbox")({**view, "messages": view["messages"][:2]})
    # The demo's brain acts on the mail, and its Bash call goes out as Gemini's tool.
    brain_turn, _ = WorkerBrain("jim").respond(view)
    [chunk] = [c for c in stream_chunks(brain_turn, "m") if "functionCall" in str(c)]
    part = chunk["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert part["name"] == "run_shell_command" and "hive" in part["args"]["command"]


def test_a_denied_call_is_an_error_result_in_the_view() -> None:
    denied = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "x",
                            "name": "run_shell_command",
                            "response": {"error": "Tool execution blocked: no network"},
                        }
                    }
                ],
            }
        ]
    }
    [block] = claude_view(denied)["messages"][0]["content"]
    assert block == {
        "type": "tool_result",
        "tool_use_id": "x",
        "content": "Tool execution blocked: no network",
        "is_error": True,
    }


def test_stream_chunks_split_text_and_end_with_the_usage() -> None:
    chunks = stream_chunks(turn(user_says("x"), "Hello there.", bash("ls")), "gemini-x")
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert "".join(p.get("text", "") for p in parts) == "Hello there."
    assert parts[-1] == {
        "functionCall": {
            "name": "run_shell_command",
            "args": {"command": "ls", "description": "scripted command"},
        }
    }
    assert all("usageMetadata" not in c for c in chunks[:-1])
    usage = chunks[-1]["usageMetadata"]
    assert (usage["promptTokenCount"], usage["candidatesTokenCount"]) == (
        PROMPT_TOKENS,
        OUTPUT_TOKENS,
    )
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    wire = encode_sse(chunks)
    assert wire.count(b"data: ") == len(chunks) and wire.endswith(b"\r\n\r\n")
    # A turn naming a Gemini tool keeps it.
    gemini_turn = turn(user_says("x"), ToolUse("write_todos", {"todos": []}), Text("ok"))
    assert "write_todos" in json.dumps(stream_chunks(gemini_turn, "m"))


def test_side_answers_fit_the_clis_schemas() -> None:
    # The model router's classifier and the next-speaker check (gemini 0.61.0).
    router = {
        "type": "OBJECT",
        "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER"},
        },
        "required": ["complexity_reasoning", "complexity_score"],
    }
    assert fill_schema(router) == {"complexity_reasoning": "scripted", "complexity_score": 1}
    speaker = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "next_speaker": {"type": "string", "enum": ["model", "user"]},
        },
        "required": ["reasoning", "next_speaker"],
    }
    answer = side_answer({"generationConfig": {"responseJsonSchema": speaker}})
    text = answer["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"reasoning": "scripted", "next_speaker": "user"}
    plain = side_answer({})["candidates"][0]["content"]["parts"][0]["text"]
    assert plain == "Scripted session"
