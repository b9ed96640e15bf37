"""The cache's effects: gh, the kept logs and run.json, and the list of run.json files
memory indexes."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO, Literal, NamedTuple

import msgspec

from hive_core.ci.runs import (
    GITHUB_NAME,
    CachedRun,
    CiLogError,
    RunKey,
    key_of,
    parse_run,
    split_repo,
    summarise,
)
from hive_core.fsio import atomic_write, read_regular
from hive_core.ids import utc_now_iso
from hive_core.paths import CiRun, HivePaths

LogKind = Literal["failed", "full"]
# The fields `gh run view --json` is asked for (gh's names).
GH_FIELDS = (
    "attempt,conclusion,databaseId,displayTitle,event,headBranch,headSha,jobs,status,url,"
    "workflowName"
)
RUN_JSON_MAX = 1024 * 1024
GH_TIMEOUT_S = 300.0


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
    index: Callable[[list[Path]], object],
) -> Viewed:
    """The cached log of `run_id` (fetched and kept on a miss, its new run.json given to
    `index`: memory's, which the caller holds)."""
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
            summary = summarise(meta, key, log.decode(errors="replace"), by, utc_now_iso())
            atomic_write(run.summary, msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
            index([run.summary])
    except (OSError, sqlite3.Error) as e:
        return Viewed(key, cached, hit=False, unkept=(log, str(e)))
    return Viewed(key, cached, hit=False)


def copy_out(path: Path, out: IO[bytes]) -> None:
    """Stream a cached log (never through a symlink) to `out`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        shutil.copyfileobj(f, out)


# --- the cache's run.json files, which memory indexes -----------------------------------------


def summary_run(paths: HivePaths, path: Path | str) -> CiRun | None:
    """The attempt whose run.json `path` is (absolute, or relative to the home):
    `<ci-logs>/<owner>/<repo>/<run>/<attempt>/run.json` with GitHub's names; else None."""
    key = paths.ci_summary_of(path)
    if key is None or not (GITHUB_NAME.match(key[0]) and GITHUB_NAME.match(key[1])):
        return None
    return paths.ci_run(*key)


def attempts(paths: HivePaths) -> list[CiRun]:
    root = paths.ci_logs
    return [
        paths.ci_run(owner.name, repo.name, int(run.name), int(attempt.name))
        for owner in _folders(root)
        if GITHUB_NAME.match(owner.name)
        for repo in _folders(owner)
        if GITHUB_NAME.match(repo.name)
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
    return [run.summary for run in attempts(paths) if run.summary.is_file()]
