"""The providers the office knows, by the name office.toml uses."""

from __future__ import annotations

from hive_core.agents.claude import ClaudeProvider
from hive_core.agents.codex import CodexProvider
from hive_core.agents.gemini import GeminiProvider
from hive_core.agents.provider import Provider
from hive_core.agents.shell import ShellProvider


def providers() -> dict[str, Provider]:
    # Keyed by each provider's own `name`, one of schema.PROVIDER_NAMES (the test of
    # provider names checks there is one provider for each).
    made: list[Provider] = [ClaudeProvider(), CodexProvider(), GeminiProvider(), ShellProvider()]
    return {provider.name: provider for provider in made}
