"""The CI-log cache (issue 16): `hive ci-logs view` against a fake `gh` on PATH that
counts its calls, the PreToolUse rewrite, retention, and the office's sweep finding the
CLI's cache from another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hive_core import ci
from hive_core.agents.claude import ClaudeProvider
from hive_core.agents.codex import CodexProvider
from hive_core.agents.gemini import GeminiProvider
from hive_core.agents.provider import CanonicalEvent, HookDecision
from hive_core.ci import rewrite_command
from hive_core.events.policy import ci_log_rewrite
from hive_core.memory.entry import Entry, entry_id
from hive_core.memory.store import open_store
from hive_core.paths import HivePaths
from hive_core.schema import OfficeSettings
from tests.support import wait_for

BIN = Path(sys.executable).parent
REPO = "octo/app"

FAKE_GH = """#!{python}
# A stand-in for GitHub's CLI: records each call, answers from state.json.
import json, pathlib, sys

here = pathlib.Path(__file__).parent
state = json.loads((here / "state.json").read_text())
args = sys.argv[1:]
with open(here / "calls.log", "a") as f:
    f.write(" ".join(args) + "\\n")

def opt(name, default):
    return args[args.index(name) + 1] if name in args else default

run = int(args[2])
attempt = int(opt("--attempt", state["attempt"]))
repo = opt("--repo", state["repo"])
if "--json" in args:
    print(json.dumps({{
        "databaseId": run, "attempt": attempt, "status": "completed",
        "conclusion": "failure", "url": f"https://github.com/{{repo}}/actions/runs/{{run}}",
        "workflowName": "CI", "displayTitle": "Fix the parser", "headBranch": "main",
        "headSha": "abc123def4567890", "event": "push", "newField": [1, 2],
        "jobs": [
            {{"name": "lint", "databaseId": 9001, "conclusion": "success",
             "steps": [{{"name": "ruff", "conclusion": "success"}}]}},
            {{"name": "test", "databaseId": 9002, "conclusion": "failure",
             "steps": [{{"name": "Run pytest", "conclusion": "failure"}}]}},
        ],
    }}))
elif "--log-failed" in args:
    print(f"test\\tRun pytest\\t2026-12-01T07:00:00.1234567Z FAILED test_timeout "
          f"(quasarflux, attempt {{attempt}})")
elif "--log" in args:
    print(f"lint\\truff\\t2026-12-01T07:00:00Z All checks passed (attempt {{attempt}})")
    print(f"test\\tRun pytest\\t2026-12-01T07:00:01Z FAILED test_timeout "
          f"(quasarflux, attempt {{attempt}})")
"""


class FakeGh:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        script = folder / "gh"
        script.write_text(FAKE_GH.format(python=sys.executable))
        script.chmod(0o755)
        self.set(attempt=1)

    def set(self, *, attempt: int) -> None:
        (self.folder / "state.json").write_text(json.dumps({"attempt": attempt, "repo": REPO}))

    def calls(self) -> list[str]:
        try:
            return (self.folder / "calls.log").read_text().splitlines()
        except FileNotFoundError:
            return []

    def log_calls(self) -> list[str]:
        return [c for c in self.calls() if "--log" in c.split() or "--log-failed" in c.split()]


@pytest.fixture
def gh(tmp_path: Path) -> FakeGh:
    return FakeGh(tmp_path / "fakebin")


def hive(
    paths: HivePaths, gh: FakeGh, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["PATH"] = f"{gh.folder}{os.pathsep}{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HIVE_HOME"] = str(paths.home)
    return subprocess.run(
        [str(BIN / "hive"), "ci-logs", "view", *args],
        env=env,
        cwd=cwd or paths.home.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ci_entry(paths: HivePaths, external_id: str) -> Entry | None:
    with open_store(paths) as store:
        return store.lookup(entry_id("ci", external_id))


def sweep(paths: HivePaths, settings: OfficeSettings) -> list[str]:
    """One pass as the office makes it, on an index opened for it."""
    with open_store(paths) as store:
        return ci.sweep(paths, settings, store)


def test_a_miss_fetches_once_and_a_hit_reads_the_cache(office_home: HivePaths, gh: FakeGh) -> None:
    first = hive(office_home, gh, "123", "--repo", REPO, "--log-failed")
    assert first.returncode == 0, first.stderr
    assert "FAILED test_timeout (quasarflux, attempt 1)" in first.stdout
    assert len(gh.log_calls()) == 1 and len(gh.calls()) == 2  # metadata, then the log

    again = hive(office_home, gh, "123", "--repo", REPO, "--log-failed")
    assert again.stdout == first.stdout and "from the cache" in again.stderr
    # The hit asked only which attempt is the latest: no log was downloaded.
    assert len(gh.log_calls()) == 1 and len(gh.calls()) == 3

    pinned = hive(office_home, gh, "123", "--repo", REPO, "--attempt", "1", "--log-failed")
    assert pinned.stdout == first.stdout
    assert len(gh.calls()) == 3  # attempt known: no call at all

    # The run and its failed job are office memory; the job that passed is not.
    run = ci_entry(office_home, f"{REPO}#123#1")
    failed = ci_entry(office_home, f"{REPO}#123#1#9002")
    assert (
        run is not None
        and failed is not None
        and ci_entry(office_home, f"{REPO}#123#1#9001") is None
    )
    assert "quasarflux" in failed.text and "Run pytest" in failed.text
    with open_store(office_home) as store:
        hits = store.search("quasarflux", caller="jim", scope="office")
    assert [h.entry.external_id for h in hits] == [f"{REPO}#123#1#9002"]


def test_the_whole_log_is_its_own_miss_and_the_repo_comes_from_gh(
    office_home: HivePaths, gh: FakeGh
) -> None:
    failed = hive(office_home, gh, "77", "--log-failed")  # no --repo: gh's answer names it
    assert failed.returncode == 0, failed.stderr
    full = hive(office_home, gh, "77", "--log")
    assert full.returncode == 0, full.stderr
    assert "All checks passed (attempt 1)" in full.stdout
    assert len(gh.log_calls()) == 2
    assert office_home.ci_run("octo", "app", 77, 1).full_log.is_file()


def test_a_rerun_attempt_is_a_miss(office_home: HivePaths, gh: FakeGh) -> None:
    assert hive(office_home, gh, "123", "--repo", REPO).returncode == 0
    gh.set(attempt=2)  # the run was re-run: same id, new attempt
    rerun = hive(office_home, gh, "123", "--repo", REPO)
    assert rerun.returncode == 0, rerun.stderr
    assert "attempt 2" in rerun.stdout and "attempt 1" not in rerun.stdout
    assert len(gh.log_calls()) == 2
    assert "--attempt 2" in gh.log_calls()[-1]
    assert ci_entry(office_home, f"{REPO}#123#2#9002") is not None
    # The first attempt is still what it was.
    old = hive(office_home, gh, "123", "--repo", REPO, "--attempt", "1")
    assert "attempt 1" in old.stdout and len(gh.log_calls()) == 2


def test_a_log_that_cannot_be_kept_is_still_printed(office_home: HivePaths, gh: FakeGh) -> None:
    # Something in the cache's way (as a read-only sandbox would be; tests run as root,
    # where a mode is no obstacle).
    office_home.ci_logs.write_text("not a folder")
    shown = hive(office_home, gh, "5", "--repo", REPO)
    assert shown.returncode == 0, shown.stderr
    assert "quasarflux" in shown.stdout and "not kept" in shown.stderr
    assert ci_entry(office_home, f"{REPO}#5#1") is None
    office_home.ci_logs.unlink()
    # Once it can be kept, the next view is a miss that keeps it.
    assert "fetched and kept" in hive(office_home, gh, "5", "--repo", REPO).stderr


def test_a_bad_repo_is_refused_before_gh_runs(office_home: HivePaths, gh: FakeGh) -> None:
    refused = hive(office_home, gh, "123", "--repo", "../../etc")
    assert refused.returncode == 2 and "OWNER/REPO" in refused.stderr
    assert gh.calls() == []


# --- the PreToolUse rewrite ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "rewritten"),
    [
        (
            "gh run view 123 --log-failed --repo o/r",
            "hive ci-logs view 123 --log-failed --repo o/r",
        ),
        ("gh run view 123 --log", "hive ci-logs view 123 --log"),
        ("gh run view --log -R o/r 9 -a 2", "hive ci-logs view 9 --log --attempt 2 --repo o/r"),
        ("gh run view 5 --repo=o/r --log-failed", "hive ci-logs view 5 --log-failed --repo o/r"),
    ],
)
def test_a_plain_gh_run_view_is_rewritten(command: str, rewritten: str) -> None:
    assert rewrite_command(command) == rewritten


@pytest.mark.parametrize(
    "command",
    [
        "gh run view 123 --log-failed && rm -rf /tmp/x",
        "gh run view 123 --log-failed; echo hi",
        "gh run view 123 --log | grep error",
        "gh run view 123 --log > out.txt",
        "gh run view $(cat id) --log",
        "gh run view 123 --log --repo 'o/r'",
        "gh run view `id` --log",
        "gh run view 123 --log\nrm x",
        "gh run view 123 --log &",
        "gh run view 123",  # no log asked for
        "gh run view 123 --log --web",  # a flag the cache does not know
        "gh run view 123 456 --log",
        "gh run view 123 --log --log-failed",
        "gh run view 123 --log --repo ../x",
        "gh run view 123 --log --attempt 0",
        "gh run list --log",
        "sudo gh run view 123 --log",
    ],
)
def test_anything_but_the_plain_form_passes_untouched(command: str) -> None:
    assert rewrite_command(command) is None
    event = CanonicalEvent("PreToolUse", tool_name="Bash", tool_input={"command": command})
    assert ci_log_rewrite(event) is None


def test_the_rewrite_is_rendered_as_an_allowed_updated_input() -> None:
    event = CanonicalEvent(
        "PreToolUse",
        tool_name="Bash",
        tool_input={"command": "gh run view 1 --log-failed", "description": "read CI"},
    )
    rewrite = ci_log_rewrite(event)
    assert rewrite == {"command": "hive ci-logs view 1 --log-failed", "description": "read CI"}
    for provider in (ClaudeProvider(), CodexProvider()):
        out = json.loads(provider.render(event, HookDecision(rewrite=rewrite)).stdout)
        specific = out["hookSpecificOutput"]
        assert specific["permissionDecision"] == "allow"
        assert specific["updatedInput"] == rewrite
    # Gemini's BeforeTool merges hookSpecificOutput.tool_input into the call's arguments.
    gemini = json.loads(GeminiProvider().render(event, HookDecision(rewrite=rewrite)).stdout)
    assert gemini == {"hookSpecificOutput": {"tool_input": rewrite}}
    # Nothing to rewrite: no output at all, so the call runs as the model wrote it.
    assert ClaudeProvider().render(event, HookDecision()).stdout == ""


# --- retention ----------------------------------------------------------------------------


def _age(paths: HivePaths, run: int, attempt: int, days: float) -> None:
    then = time.time() - days * 86400
    for file in paths.ci_run("octo", "app", run, attempt).files():
        if file.exists():
            os.utime(file, (then, then))


def test_retention_deletes_the_file_and_its_entries_together(
    office_home: HivePaths, gh: FakeGh
) -> None:
    for run in ("1", "2", "3"):
        assert hive(office_home, gh, run, "--repo", REPO).returncode == 0
    _age(office_home, 1, 1, days=40)
    _age(office_home, 2, 1, days=5)
    old, young, newest = (office_home.ci_run("octo", "app", r, 1) for r in (1, 2, 3))
    # A file the cache did not write stays, and so does its folder.
    (old.root / "notes.txt").write_text("mine")

    settings = OfficeSettings(ci_logs_max_age_days=30, ci_logs_max_mb=100)
    removed = sweep(office_home, settings)
    assert len(removed) == 1 and "older than 30 days" in removed[0]
    assert not old.summary.exists() and not old.failed_log.exists()
    assert (old.root / "notes.txt").read_text() == "mine"
    assert ci_entry(office_home, f"{REPO}#1#1") is None
    assert ci_entry(office_home, f"{REPO}#1#1#9002") is None
    assert ci_entry(office_home, f"{REPO}#2#1#9002") is not None

    # Over the size cap: the oldest goes first, the newest stays.
    size = sum(f.stat().st_size for f in newest.files() if f.exists())
    sweep(office_home, OfficeSettings(ci_logs_max_mb=size * 1.5 / 1e6))
    assert not young.root.exists() and ci_entry(office_home, f"{REPO}#2#1") is None
    assert newest.summary.exists() and ci_entry(office_home, f"{REPO}#3#1") is not None

    # Entries whose run.json went some other way are deleted too.
    newest.summary.unlink()
    assert ci_entry(office_home, f"{REPO}#3#1") is not None
    sweep(office_home, OfficeSettings())
    assert ci_entry(office_home, f"{REPO}#3#1") is None
    # Its log, now without a run.json, is left while a writer may be between the two
    # writes, and goes once older than that.
    assert newest.failed_log.exists()
    then = time.time() - ci.ORPHAN_GRACE_S - 60
    os.utime(newest.failed_log, (then, then))
    sweep(office_home, OfficeSettings())
    assert not newest.root.exists()


def test_a_reindex_keeps_the_cache_entries(office_home: HivePaths, gh: FakeGh) -> None:
    assert hive(office_home, gh, "8", "--repo", REPO).returncode == 0
    with open_store(office_home) as store:
        store.reindex()
        assert store.lookup(entry_id("ci", f"{REPO}#8#1#9002")) is not None


def test_the_office_sweep_and_the_cli_agree_on_the_folder(
    office_home: HivePaths, gh: FakeGh, tmp_path: Path
) -> None:
    # The CLI: HIVE_HOME set, run from one folder.
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    assert hive(office_home, gh, "42", "--repo", REPO, cwd=elsewhere).returncode == 0
    run = office_home.ci_run("octo", "app", 42, 1)
    assert run.failed_log.is_file()
    _age(office_home, 42, 1, days=31)
    # The office: no HIVE_HOME, a relative --home, another cwd.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    serve = subprocess.Popen(
        [sys.executable, "-m", "hive_core.cli.office", "serve", "--no-agents", "--home", "home"],
        cwd=office_home.home.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: not run.root.exists(), "the office's sweep to expire run 42")
        assert ci_entry(office_home, f"{REPO}#42#1") is None
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
