"""A scripted Anthropic Messages API for tests and the demo.

A test and demo tool, not part of the product: nothing outside tests, bench and the demo imports it.

scenario = Scenario([
    turn(user_says("check mail"), "Checking.", bash("hive inbox")),
    turn(has_tool_result(), "Done."),
])
with ScriptedModel(scenario) as model:
    env = claude_environment(model.base_url, ...)   # see hive_core.demo.claude_env
    ...
    model.wait_for(lambda r: r.turn == 1)
"""

from hive_core.demo.scripted_model.anthropic import RecordedRequest, ScriptedModel
from hive_core.demo.scripted_model.scenario import (
    ApiError,
    Block,
    Predicate,
    Request,
    Scenario,
    Text,
    ToolUse,
    Turn,
    anything,
    api_error,
    bash,
    has_tool_result,
    is_main,
    last_user_texts,
    tool_result_says,
    turn,
    user_says,
)

__all__ = [
    "ApiError",
    "Block",
    "Predicate",
    "RecordedRequest",
    "Request",
    "Scenario",
    "ScriptedModel",
    "Text",
    "ToolUse",
    "Turn",
    "anything",
    "api_error",
    "bash",
    "has_tool_result",
    "is_main",
    "last_user_texts",
    "tool_result_says",
    "turn",
    "user_says",
]
