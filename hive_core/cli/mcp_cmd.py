"""`hive mcp`: serve the office's memory and mail as MCP tools on stdin/stdout.

An agent CLI starts it (claude through `--mcp-config`, see agents/claude.py) with the
agent's environment; the caller is settled at start by the rule every `hive` verb
follows, and asked again on every tool call (mcp_server.py). stdout belongs to the
protocol: every message of ours goes to stderr.
"""

from __future__ import annotations

import click

from hive_core.caller import CallerError
from hive_core.cli.common import (
    REFUSED,
    USAGE,
    HiveError,
    click_home,
    fail,
    home_option,
    office_paths,
)
from hive_core.config import ConfigError


@click.command("mcp")
@home_option
def mcp_command() -> None:
    """Serve memory and mail to an agent CLI as MCP tools (stdio).

    \b
    Tools: memory_write, memory_query, memory_forget, memory_edit, list_scopes,
    send, inbox; all act as the caller, whom the office tells from the calling
    process while it runs.
    The office registers it for claude agents; to add it to a CLI by hand:
      claude mcp add hive -- hive mcp
    """
    # Imported here: the mcp package takes most of a second to import, and every other
    # `hive` verb (agents run them constantly) must not pay for it.
    from hive_core.cli import mcp_server

    try:
        caller = mcp_server.open_caller(office_paths(click_home()))
    except (HiveError, ConfigError) as e:
        fail(str(e), REFUSED, "hive mcp")
    except CallerError as e:
        fail(f"{e} The MCP server acts only for a known caller; not starting.", USAGE, "hive mcp")
    mcp_server.run(caller)
