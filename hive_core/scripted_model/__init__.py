"""A scripted Anthropic Messages API for tests and the demo.

scenario = Scenario([
    turn(user_says("check mail"), "Checking.", bash("hive inbox")),
    turn(has_tool_result(), "Done."),
])
with ScriptedModel(scenario) as model:
    env = claude_environment(model.base_url, ...)   # see hive_core.claude_env
    ...
    model.wait_for(lambda r: r.turn == 1)
"""

from hive_core.scripted_model.scenario import (
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
from hive_core.scripted_model.server import RecordedRequest, ScriptedModel

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
