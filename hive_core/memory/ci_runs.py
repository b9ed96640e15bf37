"""The CI-log cache's run.json as a memory source (hive_core/ci/ keeps the cache): one
entry for the run and one per failed job, at office scope."""

from __future__ import annotations

import os
from pathlib import Path

from hive_core.ci import CachedRun, read_summary
from hive_core.memory.entry import OFFICE, Entry
from hive_core.paths import HivePaths


def entries(cached: CachedRun, rel: str) -> list[Entry]:
    """The run's memory entries: its summary, and one per failed job (office scope)."""
    key = cached.key()
    view = f"hive ci-logs view {key.run_id} --repo {key.slug} --attempt {key.attempt}"
    tags = (
        "ci",
        f"repo:{key.slug}",
        f"run_id:{key.run_id}",
        f"attempt:{key.attempt}",
        f"workflow:{cached.workflow}",
        f"commit:{cached.commit}",
        f"status:{cached.conclusion}",
    )
    names = ", ".join(job.name for job in cached.failed_jobs)
    failing = (
        f"{len(cached.failed_jobs)} of {cached.jobs_total} jobs failed: {names}."
        if cached.failed_jobs
        else f"no job of {cached.jobs_total} failed."
    )
    summary = (
        f"CI run {key.run_id} attempt {key.attempt} of {key.slug} ({cached.workflow}, "
        f"{cached.event} on {cached.branch} at {cached.commit[:12]}): {cached.conclusion}; "
        f"{failing} {cached.title}\nLog: `{view} --log-failed` ({cached.url})"
    )

    def entry(external_id: str, text: str, more: tuple[str, ...] = ()) -> Entry:
        return Entry(
            source="ci",
            external_id=external_id,
            owner=OFFICE,
            scope="office",
            text=text,
            path=rel,
            created_at=cached.fetched_at,
            updated_at=cached.fetched_at,
            tags=tags + more,
        )

    found = [entry(key.external_id, summary)]
    for job in cached.failed_jobs:
        steps = ", ".join(job.failed_steps) or "no step named"
        text = (
            f"CI job {job.name!r} {job.conclusion} in run {key.run_id} attempt "
            f"{key.attempt} of {key.slug} (failed steps: {steps}). Last lines:\n"
            f"{job.excerpt or '(none in the cached log)'}"
        )
        found.append(entry(f"{key.external_id}#{job.job_id}", text, (f"job:{job.name}",)))
    return found


def indexed(paths: HivePaths, rel: str) -> list[Entry]:
    """The entries of the run.json at `rel`: none if it describes another run than its
    folder says (OSError or DecodeError if it is gone or not a run.json)."""
    file = Path(os.path.normpath(paths.hive / rel))
    cached = read_summary(file)
    try:
        key = cached.key()
    except ValueError:
        return []
    return entries(cached, rel) if paths.ci_run(*key).summary == file else []
