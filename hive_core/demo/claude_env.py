"""A throwaway Claude Code home that starts without a single prompt, for tests and the demo.

A test and demo tool, not part of the product: nothing outside tests, bench and the demo imports it.

    write_claude_config(config_dir, api_key, trusted=[cwd, ...]) -> Path of .claude.json
    claude_environment(base_url=..., api_key=..., config_dir=..., base=os.environ) -> env

`write_claude_config` creates CLAUDE_CONFIG_DIR/.claude.json with onboarding done, the
API key approved and every `trusted` folder's trust dialog accepted. `claude_environment`
returns the environment for a claude process pointed at that home and at `base_url` (the
scripted model, normally), with telemetry and other non-essential traffic off.

Facts from claude 2.1.197 that shape this:
- `customApiKeyResponses.approved` holds the key's abbreviation (login.approved_key_form:
  its last 20 characters), not the key.
- `projects` is keyed by the absolute, symlink-resolved working directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from hive_core.agents.login import approved_key_form
from hive_core.fsio import atomic_write


class ProjectConfig(msgspec.Struct):
    hasTrustDialogAccepted: bool = True


class ApiKeyResponses(msgspec.Struct):
    approved: list[str]
    rejected: list[str] = msgspec.field(default_factory=list)


class ClaudeConfig(msgspec.Struct):
    """The keys of .claude.json that gate the first-run screens."""

    customApiKeyResponses: ApiKeyResponses
    projects: dict[str, ProjectConfig]
    hasCompletedOnboarding: bool = True


def write_claude_config(config_dir: Path, api_key: str, trusted: Iterable[Path]) -> Path:
    config_dir.mkdir(parents=True, exist_ok=True)
    config = ClaudeConfig(
        customApiKeyResponses=ApiKeyResponses(approved=[approved_key_form(api_key)]),
        projects={str(Path(p).resolve()): ProjectConfig() for p in trusted},
    )
    path = config_dir / ".claude.json"
    atomic_write(path, msgspec.json.format(msgspec.json.encode(config)))
    return path


def claude_environment(
    *,
    base_url: str,
    api_key: str,
    config_dir: Path,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    # A real login in the caller's environment would win over the API key.
    for name in (
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
    ):
        env.pop(name, None)
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=api_key,
        CLAUDE_CONFIG_DIR=str(config_dir),
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    return env
