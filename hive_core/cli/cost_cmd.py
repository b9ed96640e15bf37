"""`hive-office cost`: tokens and estimated cost per agent, task or day.

It reads the agents' CLI records itself (hive_core/cost/__init__.py, usage.py), so it answers
whether or not an office runs; the sessions to look for are the ones the office
recorded in run/usage.json and the registry's current ones.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

import click
import msgspec

from hive_core.agents.providers import providers
from hive_core.cli.common import HOME_HELP
from hive_core.config import ConfigError, load_office
from hive_core.cost import CostWatch, Sum, count, money
from hive_core.hive import read_registry
from hive_core.paths import HivePaths, resolve_home

By = Literal["agent", "task", "day"]


@click.command("cost")
@click.option("--home", metavar="DIR", help=HOME_HELP)
@click.option(
    "--by",
    type=click.Choice(["agent", "task", "day"]),
    default="agent",
    show_default=True,
    help="Sum per agent, per task (while its assignee held it) or per UTC day.",
)
@click.option("--json", "as_json", is_flag=True, help="The sums as JSON.")
@click.pass_context
def cost_command(ctx: click.Context, home: str | None, by: By, as_json: bool) -> None:
    """Tokens (input, output, cache write, cache read) and estimated cost, read from the
    agents' own CLI records (Claude Code transcripts, Codex rollouts; none for shell).

    Prices are list prices in USD per million tokens; office.toml's [prices."FAMILY"]
    overrides them. Works with or without a running office.

    \b
      hive-office cost
      hive-office cost --by task
      hive-office cost --by day --json
    """
    paths = HivePaths(resolve_home(home or (ctx.obj or {}).get("home")))
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        click.echo(f"hive-office: {e}", err=True)
        sys.exit(1)
    # The sessions the office recorded (run/usage.json) and the registry's current ones.
    watch = CostWatch(paths, config, providers(), os.environ)
    registry = read_registry(paths)
    watch.read_pass({e.id: e.session_id for e in registry.agents} if registry else {})
    sums = watch.summary(by)
    if as_json:
        rows = {name: msgspec.to_builtins(total) for name, total in sorted(sums.items())}
        click.echo(msgspec.json.encode({"by": by, "rows": rows}).decode())
    else:
        click.echo(render_costs(by, sums))


def _row(name: str, total: Sum) -> tuple[str, ...]:
    t = total.tokens
    cells = (count(t.input), count(t.output), count(t.cache_write), count(t.cache_read))
    return (name, *cells, money(total.cost))


def render_costs(by: By, sums: dict[str, Sum]) -> str:
    if not sums:
        return "No usage recorded yet (shell agents have none)."
    rows: list[tuple[str, ...]] = [
        (by.upper(), "INPUT", "OUTPUT", "CACHE WRITE", "CACHE READ", "COST")
    ]
    total = Sum()
    unpriced: set[str] = set()
    for name, value in sorted(sums.items()):
        total = Sum(tokens=total.tokens + value.tokens, cost=total.cost + value.cost)
        unpriced.update(value.unpriced)
        rows.append(_row(name, value))
    rows.append(_row("total", total))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    if unpriced:
        lines.append(
            f"No price for {', '.join(sorted(unpriced))}: tokens counted, cost not; "
            'add [prices."FAMILY"] to office.toml.'
        )
    if by == "task":
        lines.append("Work outside any task is not in this view (see --by agent).")
    return "\n".join(lines)
