"""The CI-log cache (a GitHub Actions feature): `hive ci-logs view RUN` reads a GitHub Actions log once with `gh`, keeps
it under the office home (HivePaths.ci_logs, the one place that names the folder), and
indexes what failed as office memory.

Keyed on (owner/repo, run, attempt). GitHub keeps a run's id when it is re-run, so the
attempt is part of the key and of every entry's external id
(`owner/repo#run#attempt[#job id]`): a re-run is a miss, never the first attempt's log.
The current attempt is only known by asking, so a view without `--attempt` asks `gh`
for the run's metadata (a small JSON) and downloads the log only on a miss; with
`--repo` and `--attempt` a hit makes no call at all.

Layout of one attempt (paths.CiRun): the logs as fetched (`failed.log`, `full.log`) and
`run.json` (CachedRun: the run's metadata and each failed job with the tail of its log).
run.json is a memory source like a hive file (memory/sources.py reads it): one entry
for the run, one per failed job, at office scope, so `hive memory reindex` rebuilds them
and deleting run.json deletes them. run.json is written after the log, so a run.json
always has a log beside it when it appears.

Retention (`sweep`, run by the office every SWEEP_INTERVAL_S): an attempt fetched more
than `ci_logs_max_age_days` ago goes, then the oldest while the cache holds more than
`ci_logs_max_mb`; a run.json whose logs are gone goes; logs with no run.json go after
ORPHAN_GRACE_S (a writer between its two writes). Deleting an attempt deletes its
entries in the same pass, and entries whose run.json is gone are deleted too. Only the
files the cache writes are deleted (CiRun.files), never anything else in the folder.

The PreToolUse rewrite (`rewrite_command`, pure): a plain `gh run view ID --log` or
`--log-failed` (with `--repo`/`-R`, `--attempt`/`-a`) becomes `hive ci-logs view ...`.
Anything else passes untouched: a compound command, any shell metacharacter or quote,
any other flag.

- runs.py: gh's answers, run.json, and the pure decisions over them;
- rewrite.py: the PreToolUse rewrite;
- cache.py: gh and the cache's files (`hive ci-logs view`);
- retention.py: the office's sweep.

memory reads run.json as one of its sources (memory/ci_runs.py); this package does not
import memory: what it indexes or deletes goes through the `Index` its callers give.
"""

from hive_core.ci.cache import (
    CiLogError,
    LogKind,
    copy_out,
    read_summary,
    summaries,
    summary_run,
    view,
)
from hive_core.ci.retention import Index, sweep, sweep_loop
from hive_core.ci.rewrite import rewrite_command
from hive_core.ci.runs import ORPHAN_GRACE_S, CachedRun, split_repo

__all__ = [
    "ORPHAN_GRACE_S",
    "CachedRun",
    "CiLogError",
    "Index",
    "LogKind",
    "copy_out",
    "read_summary",
    "rewrite_command",
    "split_repo",
    "summaries",
    "summary_run",
    "sweep",
    "sweep_loop",
    "view",
]
