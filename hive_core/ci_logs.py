"""The CI-log cache: `hive ci-logs view RUN` reads a GitHub Actions log once with `gh`, keeps
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

Pure parts first (key, parse, plan, rewrite); effects (gh, files, memory.db) below.
memory.store is imported inside the effects: memory/sources.py imports this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal, NamedTuple

import msgspec

from hive_core.fsio import atomic_write, read_regular
from hive_core.memory.entry import OFFICE, Entry, hive_relative, now_iso
from hive_core.paths import CiRun, HivePaths

if TYPE_CHECKING:
    from hive_core.memory.store import MemoryStore
    from hive_core.schema import OfficeSettings

LogKind = Literal["failed", "full"]
# The fields `gh run view --json` is asked for (gh's names).
GH_FIELDS = (
    "attempt,conclusion,databaseId,displayTitle,event,headBranch,headSha,jobs,status,url,"
    "workflowName"
)
# A job that failed for the summary and its own entry (gh's job conclusions).
FAILED = frozenset({"failure", "timed_out", "startup_failure"})
# Each failed job's entry holds the last lines of its log (the error is nearly always
# at the end), each cut to a line's worth.
EXCERPT_LINES = 20
EXCERPT_LINE_MAX = 240
RUN_JSON_MAX = 1024 * 1024
GH_TIMEOUT_S = 300.0
SWEEP_INTERVAL_S = 3600.0
ORPHAN_GRACE_S = 600.0
# GitHub's owner and repository names; never "." or "..", so a name is one folder.
_NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$")
_RUN_URL = re.compile(r"^https://[^/]+/([^/]+)/([^/]+)/actions/runs/(\d+)")
# A gh log line: job, step, then the runner's timestamp (dropped from excerpts).
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")


class CiLogError(Exception):
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
    if not (_NAME.match(owner) and _NAME.match(name)):
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


# --- the PreToolUse rewrite (pure) -----------------------------------------------------------

# Only these characters: no quote, no $, no `;&|<>()`, no glob, no newline, no comment.
_PLAIN_COMMAND = re.compile(r"^[A-Za-z0-9 \t./=_-]+$")
_DIGITS = re.compile(r"^[1-9][0-9]{0,19}$")


def rewrite_command(command: str) -> str | None:
    """`hive ci-logs view ...` for a plain `gh run view ID --log[-failed] [--repo R]
    [--attempt N]`, in any order; None for anything else (which then runs untouched)."""
    if not _PLAIN_COMMAND.match(command):
        return None
    words = command.split()
    if words[:3] != ["gh", "run", "view"]:
        return None
    run: str | None = None
    log: str | None = None
    options: dict[str, str] = {}
    rest = words[3:]
    while rest:
        word, rest = rest[0], rest[1:]
        name, eq, value = word.partition("=")
        if word in ("--log", "--log-failed") and log is None:
            log = word
        elif name in ("--repo", "-R", "--attempt", "-a"):
            if not eq:
                if not rest:
                    return None
                value, rest = rest[0], rest[1:]
            option = "--repo" if name in ("--repo", "-R") else "--attempt"
            if option in options:
                return None
            options[option] = value
        elif _DIGITS.match(word) and run is None:
            run = word
        else:
            return None
    if run is None or log is None:
        return None
    if "--repo" in options:
        try:
            split_repo(options["--repo"])
        except ValueError:
            return None
    if "--attempt" in options and not _DIGITS.match(options["--attempt"]):
        return None
    extra = [w for option, value in sorted(options.items()) for w in (option, value)]
    return " ".join(["hive", "ci-logs", "view", run, log, *extra])


# --- effects: gh ------------------------------------------------------------------------------

Runner = Callable[[list[str]], bytes]


def run_gh(args: list[str]) -> bytes:
    """gh's stdout; CiLogError with gh's own words when it fails."""
    gh = shutil.which("gh")
    if gh is None:
        raise CiLogError("gh is not installed (https://cli.github.com); install it and log in.")
    try:
        done = subprocess.run(
            [gh, *args], capture_output=True, timeout=GH_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise CiLogError(f"gh did not answer in {GH_TIMEOUT_S:g} s; try again.") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.decode(errors="replace").split())[:400]
        raise CiLogError(f"gh {' '.join(args[:3])} failed: {said or 'no message'}")
    return done.stdout


# --- effects: the cache -----------------------------------------------------------------------


def log_file(run: CiRun, kind: LogKind) -> Path:
    return run.failed_log if kind == "failed" else run.full_log


def read_summary(path: Path) -> CachedRun:
    return msgspec.json.decode(read_regular(path, RUN_JSON_MAX), type=CachedRun)


class Viewed(NamedTuple):
    key: RunKey
    log: Path
    hit: bool
    # A fetched log that could not be kept (a read-only sandbox, a full disk): the log
    # itself and why; the caller still gets it.
    unkept: tuple[bytes, str] | None = None


def view(
    paths: HivePaths,
    run_id: int,
    *,
    repo: str | None,
    attempt: int | None,
    kind: LogKind,
    by: str,
    gh: Runner = run_gh,
    store: MemoryStore | None = None,
) -> Viewed:
    """The cached log of `run_id` (fetched, kept and indexed on a miss)."""
    if repo is not None and attempt is not None:
        try:
            owner, name = split_repo(repo)
        except ValueError as e:
            raise CiLogError(str(e)) from None
        key = RunKey(owner, name, run_id, attempt)
        cached = log_file(paths.ci_run(*key), kind)
        if cached.is_file() and paths.ci_run(*key).summary.is_file():
            return Viewed(key, cached, hit=True)
    where = ["--repo", repo] if repo else []
    which = ["--attempt", str(attempt)] if attempt else []
    meta = parse_run(gh(["run", "view", str(run_id), *where, *which, "--json", GH_FIELDS]))
    key = key_of(meta, repo)
    run = paths.ci_run(*key)
    cached = log_file(run, kind)
    if cached.is_file() and run.summary.is_file():
        return Viewed(key, cached, hit=True)
    if meta.status != "completed":
        raise CiLogError(
            f"run {run_id} of {key.slug} is {meta.status or 'not finished'}: its log is kept "
            "once it completes. Try again then."
        )
    flag = "--log-failed" if kind == "failed" else "--log"
    log = gh(["run", "view", str(run_id), "--repo", key.slug, "--attempt", str(key.attempt), flag])
    try:
        run.root.mkdir(parents=True, exist_ok=True)
        # The log first: a run.json always has its log beside it.
        atomic_write(cached, log)
        if not run.summary.is_file():
            summary = summarise(meta, key, log.decode(errors="replace"), by, now_iso())
            atomic_write(run.summary, msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
            _index(paths, store, [run.summary])
    except (OSError, sqlite3.Error) as e:
        return Viewed(key, cached, hit=False, unkept=(log, str(e)))
    return Viewed(key, cached, hit=False)


def copy_out(path: Path, out: IO[bytes]) -> None:
    """Stream a cached log (never through a symlink) to `out`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        shutil.copyfileobj(f, out)


def _index(paths: HivePaths, store: MemoryStore | None, files: list[Path]) -> None:
    from hive_core.memory.sources import entries_for
    from hive_core.memory.store import open_store

    changes = entries_for(paths, files)
    if store is not None:
        store.apply(changes)
        return
    with open_store(paths) as own:
        own.apply(changes)


# --- memory/sources.py's side: run.json as a memory source -----------------------------------


def summary_rel(paths: HivePaths, path: Path | str) -> str | None:
    """The index's path of `path` (absolute, or relative to the home) if it is a run.json
    of the cache (`<ci-logs>/<owner>/<repo>/<run>/<attempt>/run.json`), else None."""
    key = paths.ci_summary_of(path)
    if key is None or not (_NAME.match(key[0]) and _NAME.match(key[1])):
        return None
    return hive_relative(paths.hive, paths.ci_run(*key).summary)


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


def _attempts(paths: HivePaths) -> list[CiRun]:
    root = paths.ci_logs
    return [
        paths.ci_run(owner.name, repo.name, int(run.name), int(attempt.name))
        for owner in _folders(root)
        if _NAME.match(owner.name)
        for repo in _folders(owner)
        if _NAME.match(repo.name)
        for run in _folders(repo)
        if run.name.isdigit()
        for attempt in _folders(run)
        if attempt.name.isdigit()
    ]


def _folders(folder: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def summaries(paths: HivePaths) -> list[Path]:
    """Every run.json in the cache (for `reindex`)."""
    return [run.summary for run in _attempts(paths) if run.summary.is_file()]


# --- effects: retention --------------------------------------------------------------------


def _scan(run: CiRun) -> Cached:
    size, newest, summary, logs = 0, 0.0, False, False
    for file in run.files():
        try:
            st = file.lstat()
        except OSError:
            continue
        size += st.st_size
        newest = max(newest, st.st_mtime)
        summary |= file == run.summary
        logs |= file != run.summary
    return Cached(run, size, newest, summary, logs)


def sweep(
    paths: HivePaths, settings: OfficeSettings, store: MemoryStore | None = None
) -> list[str]:
    """One retention pass; what was deleted and why (for the office's log)."""
    if store is None:
        from hive_core.memory.store import open_store

        with open_store(paths) as own:
            return sweep(paths, settings, own)
    found = [_scan(run) for run in _attempts(paths)]
    plan = expired(
        found,
        time.time(),
        settings.ci_logs_max_age_days * 86400,
        settings.ci_logs_max_mb * 1e6,
    )
    done: list[str] = []
    for run, why in plan:
        # run.json and its entries first: an entry never outlives its file, and a crash
        # after this leaves logs the next pass takes as orphans.
        with contextlib.suppress(FileNotFoundError):
            run.summary.unlink()
        store.delete_source_file(run.summary)
        for file in run.files():
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
        _prune(paths, run.root)
        done.append(f"{hive_relative(paths.ci_logs, run.root)}: {why}")
    # Entries whose run.json is gone however it went.
    for rel in store.paths_of("ci"):
        if not os.path.lexists(os.path.normpath(paths.hive / rel)):
            store.delete_source_file(rel)
            done.append(f"{rel}: entries without their run.json")
    return done


def _prune(paths: HivePaths, folder: Path) -> None:
    """Remove `folder` and the folders above it up to the cache, while they are empty."""
    while folder != paths.ci_logs and paths.ci_logs in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


async def sweep_loop(
    paths: HivePaths, settings: OfficeSettings, stop: asyncio.Event, log: Callable[[str], None]
) -> None:
    """The office's retention loop: a pass at start, then every SWEEP_INTERVAL_S; each
    deletion goes to `log` (the office's log)."""
    while not stop.is_set():
        for line in await asyncio.to_thread(sweep, paths, settings):
            log(f"ci-logs: deleted {line}")
        try:
            await asyncio.wait_for(stop.wait(), SWEEP_INTERVAL_S)
        except TimeoutError:
            continue
