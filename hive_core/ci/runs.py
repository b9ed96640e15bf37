"""A CI run as gh describes it and as the cache keeps it (run.json), and the pure
decisions over them: the run's key, the excerpts of its failed jobs, what retention deletes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from hive_core.errors import OfficeError
from hive_core.paths import CiRun

if TYPE_CHECKING:
    pass


# A job that failed for the summary and its own entry (gh's job conclusions).
FAILED = frozenset({"failure", "timed_out", "startup_failure"})
# Each failed job's entry holds the last lines of its log (the error is nearly always
# at the end), each cut to a line's worth.
EXCERPT_LINES = 20
EXCERPT_LINE_MAX = 240
ORPHAN_GRACE_S = 600.0
# GitHub's owner and repository names; never "." or "..", so a name is one folder.
GITHUB_NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$")
_RUN_URL = re.compile(r"^https://[^/]+/([^/]+)/([^/]+)/actions/runs/(\d+)")
# A gh log line: job, step, then the runner's timestamp (dropped from excerpts).
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")


class CiLogError(OfficeError):
    """The log could not be had; the message is one sentence saying what to do."""


class RunKey(NamedTuple):
    owner: str
    repo: str
    run_id: int
    attempt: int

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def external_id(self) -> str:
        return f"{self.slug}#{self.run_id}#{self.attempt}"


def split_repo(repo: str) -> tuple[str, str]:
    """("owner", "name") of `owner/name`; ValueError with a sentence otherwise."""
    owner, _, name = repo.partition("/")
    if not (GITHUB_NAME.match(owner) and GITHUB_NAME.match(name)):
        raise ValueError(f"{repo!r} is not a repository: give it as OWNER/REPO.")
    return owner, name


# --- gh's answers (only the fields used; gh may add more) --------------------------------


class GhStep(msgspec.Struct, kw_only=True):
    name: str = ""
    conclusion: str | None = None


class GhJob(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    database_id: int = 0
    conclusion: str | None = None
    steps: list[GhStep] = []


class GhRun(msgspec.Struct, kw_only=True, rename="camel"):
    database_id: int
    attempt: int
    status: str = ""
    conclusion: str | None = None
    url: str = ""
    workflow_name: str = ""
    display_title: str = ""
    head_branch: str = ""
    head_sha: str = ""
    event: str = ""
    jobs: list[GhJob] = []


# --- run.json -------------------------------------------------------------------------------


class FailedJob(msgspec.Struct, kw_only=True):
    name: str
    job_id: int
    conclusion: str
    failed_steps: list[str] = []
    excerpt: str = ""


class CachedRun(msgspec.Struct, kw_only=True):
    """run.json: what one attempt of a run was, as `gh` said when it was fetched."""

    repo: str
    run_id: int
    attempt: int
    workflow: str
    title: str
    branch: str
    commit: str
    event: str
    conclusion: str
    url: str
    jobs_total: int
    failed_jobs: list[FailedJob]
    fetched_at: str
    fetched_by: str

    def key(self) -> RunKey:
        owner, name = split_repo(self.repo)
        return RunKey(owner, name, self.run_id, self.attempt)


# --- pure: what gh said, what to keep, what to index ----------------------------------------


def parse_run(data: bytes) -> GhRun:
    try:
        return msgspec.json.decode(data, type=GhRun)
    except msgspec.DecodeError as e:
        raise CiLogError(f"gh printed run metadata that is not understood ({e}).") from None


def key_of(run: GhRun, repo: str | None) -> RunKey:
    """The cache key of `run`: the repository given, else the one in the run's URL (gh
    found it from the cwd's git remote)."""
    if repo is None:
        found = _RUN_URL.match(run.url)
        if found is None:
            raise CiLogError(
                f"gh did not say which repository run {run.database_id} is in; give --repo."
            )
        repo = f"{found[1]}/{found[2]}"
    try:
        owner, name = split_repo(repo)
    except ValueError as e:
        raise CiLogError(str(e)) from None
    return RunKey(owner, name, run.database_id, run.attempt)


def excerpts(log: str, jobs: Iterable[str]) -> dict[str, str]:
    """The last EXCERPT_LINES lines of each job's part of a gh log (`job<TAB>step<TAB>
    line`), timestamps dropped, each line cut to EXCERPT_LINE_MAX."""
    wanted = set(jobs)
    tails: dict[str, list[str]] = {job: [] for job in wanted}
    for line in log.splitlines():
        job, tab, rest = line.partition("\t")
        if not tab or job not in wanted:
            continue
        _, _, text = rest.partition("\t")
        text = _STAMP.sub("", text).rstrip()
        if text:
            tail = tails[job]
            tail.append(text[:EXCERPT_LINE_MAX])
            if len(tail) > EXCERPT_LINES:
                del tail[0]
    return {job: "\n".join(lines) for job, lines in tails.items()}


def summarise(run: GhRun, key: RunKey, log: str, by: str, at: str) -> CachedRun:
    failed = [job for job in run.jobs if job.conclusion in FAILED]
    tails = excerpts(log, (job.name for job in failed))
    return CachedRun(
        repo=key.slug,
        run_id=key.run_id,
        attempt=key.attempt,
        workflow=run.workflow_name,
        title=run.display_title,
        branch=run.head_branch,
        commit=run.head_sha,
        event=run.event,
        conclusion=run.conclusion or run.status,
        url=run.url,
        jobs_total=len(run.jobs),
        failed_jobs=[
            FailedJob(
                name=job.name,
                job_id=job.database_id,
                conclusion=job.conclusion or "",
                failed_steps=[s.name for s in job.steps if s.conclusion in FAILED],
                excerpt=tails.get(job.name, ""),
            )
            for job in failed
        ],
        fetched_at=at,
        fetched_by=by,
    )


class Cached(NamedTuple):
    """One attempt folder as the sweep found it."""

    run: CiRun
    size: int
    fetched: float  # newest mtime of its files
    summary: bool
    logs: bool


def expired(
    found: Sequence[Cached], now: float, max_age_s: float, max_bytes: float
) -> list[tuple[CiRun, str]]:
    """Which attempts to delete, and why: a run.json without logs; logs without run.json
    older than ORPHAN_GRACE_S; anything older than max_age_s; then the oldest until the
    rest fit in max_bytes."""
    gone: list[tuple[CiRun, str]] = []
    kept: list[Cached] = []
    for item in found:
        age = now - item.fetched
        if item.summary and not item.logs:
            gone.append((item.run, "its log is gone"))
        elif not item.summary and age > ORPHAN_GRACE_S:
            gone.append((item.run, "a log with no run.json"))
        elif age > max_age_s:
            gone.append((item.run, f"older than {max_age_s / 86400:g} days"))
        else:
            kept.append(item)
    total = sum(item.size for item in kept)
    for item in sorted(kept, key=lambda c: c.fetched):
        if total <= max_bytes:
            break
        gone.append((item.run, f"the cache is over {max_bytes / 1e6:g} MB"))
        total -= item.size
    return gone
