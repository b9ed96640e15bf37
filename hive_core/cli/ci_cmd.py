"""`hive ci-logs view RUN`: a GitHub Actions log read once with `gh`, then from the office's
cache (hive_core/ci/). The failed jobs become office memory (`hive memory search`).
"""

from __future__ import annotations

import sys

import click

from hive_core import ci
from hive_core.cli.common import BadUsage, HiveError, click_home, home_option, open_caller
from hive_core.config import ConfigError
from hive_core.memory import MemoryStoreError, index_files


@click.group("ci-logs", context_settings={"help_option_names": ["-h", "--help"]})
@home_option
def ci_group() -> None:
    """CI logs from GitHub Actions, fetched once with `gh` and kept for the office.

    \b
      hive ci-logs view 123 --log-failed              (the repository of the cwd)
      hive ci-logs view 123 --repo octo/app --log
      hive ci-logs view 123 --repo octo/app --attempt 2 --log-failed

    A run's log is kept per attempt: after a re-run, the new attempt is fetched. Without
    --attempt, `gh` is asked which attempt is the latest (no log is downloaded on a hit).
    Each failed job is summarised in office memory: `hive memory search "ci"`. Kept for
    office.toml's ci_logs_max_age_days and within ci_logs_max_mb.
    """


@ci_group.command("view")
@click.argument("run_id", metavar="RUN", type=click.IntRange(min=1))
@click.option("--repo", "-R", metavar="OWNER/REPO", help="The repository (default: the cwd's).")
@click.option("--attempt", "-a", type=click.IntRange(min=1), help="The attempt (default: latest).")
@click.option("--log", "kind", flag_value="full", help="The whole log.")
@click.option(
    "--log-failed", "kind", flag_value="failed", default=True, help="The failed steps (default)."
)
@home_option
def view(run_id: int, repo: str | None, attempt: int | None, kind: ci.LogKind) -> None:
    """Print run RUN's log from the cache, fetching it with `gh` on a miss."""
    if repo is not None:
        try:
            ci.split_repo(repo)
        except ValueError as e:
            raise BadUsage(str(e)) from None
    caller = open_caller(click_home())
    try:
        viewed = ci.view(
            caller.paths,
            run_id,
            repo=repo,
            attempt=attempt,
            kind=kind,
            by=caller.who,
            index=lambda files: index_files(caller.paths, files),
        )
    except (ci.CiLogError, ConfigError, MemoryStoreError) as e:
        raise HiveError(str(e)) from None
    if viewed.unkept is not None:
        log, why = viewed.unkept
        click.echo(f"hive: {viewed.key.external_id}: fetched, not kept ({why})", err=True)
        sys.stdout.buffer.write(log)
        return
    state = "from the cache" if viewed.hit else "fetched and kept"
    click.echo(f"hive: {viewed.key.external_id} {kind} log, {state} ({viewed.log})", err=True)
    sys.stdout.flush()
    ci.copy_out(viewed.log, sys.stdout.buffer)
