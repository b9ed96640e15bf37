"""`hive mcp`: serve the office's memory and mail as MCP tools on stdin/stdout.

An agent CLI starts it (claude through `--mcp-config`, see agents/claude.py) with the
agent's environment; the caller is proven at start and fixed for the session. stdout
belongs to the protocol: every message of ours goes to stderr.
"""

from __future__ import annotations

from typing import NoReturn

import click

from hive_core.caller import CallerError
from hive_core.config import ConfigError
from hive_core.paths import HivePaths, resolve_home

REFUSED = 1
USAGE = 2
# ctx.meta is shared with `hive`'s own --home (same key), so `hive --home X mcp` and
# `hive mcp --home X` both work.
_HOME_KEY = "hive.home"


def _remember_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[_HOME_KEY] = value


def _refuse(message: str, code: int) -> NoReturn:
    click.echo(f"hive mcp: {message}", err=True)
    raise SystemExit(code)


@click.command("mcp")
@click.option(
    "--home",
    metavar="DIR",
    expose_value=False,
    callback=_remember_home,
    help="Office home (default: $HIVE_HOME, else ~/.hive-office).",
)
def mcp_command() -> None:
    """Serve memory and mail to an agent CLI as MCP tools (stdio).

    \b
    Tools: memory_write, memory_query, list_scopes, send, inbox; all act as the
    caller (HIVE_AGENT_ID, proven with HIVE_SECRET while the office runs).
    The office registers it for claude agents; to add it to a CLI by hand:
      claude mcp add hive -- hive mcp
    """
    # Imported here: the mcp package takes most of a second to import, and every other
    # `hive` verb (agents run them constantly) must not pay for it.
    from hive_core import mcp_server

    paths = HivePaths(resolve_home(click.get_current_context().meta.get(_HOME_KEY)))
    if not paths.office_toml.is_file() or not paths.hive.is_dir():
        _refuse(
            f"there is no office in {paths.home}. Run `hive-office init` to create one, "
            "or point --home or HIVE_HOME at an existing office.",
            REFUSED,
        )
    try:
        desk = mcp_server.open_desk(paths)
    except ConfigError as e:
        _refuse(str(e), REFUSED)
    except CallerError as e:
        _refuse(f"{e} The MCP server acts only for a proven caller; not starting.", USAGE)
    mcp_server.run(desk)
