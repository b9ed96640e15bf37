"""`hive lease`, `hive lease list|break` and `hive release` against a real `hive-office serve`
(no agent CLIs: the person's process acts for each desk, as the office allows while that
agent is not running), in a real git repository with an agent worktree. Every refusal
beside the call that goes through; the lease file is committed to the hive's history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support import wait_for

BIN = Path(sys.executable).parent


class Done(NamedTuple):
    rc: int
    out: str
    err: str


class RouteRoster(NamedTuple):
    home: Path
    repo: Path
    tree: Path  # pam's worktree of the repository

    def run(self, *args: str, agent: str | None = None, cwd: Path | None = None) -> Done:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
        env["HIVE_HOME"] = str(self.home)
        if agent:
            env["HIVE_AGENT_ID"] = agent
        done = subprocess.run(
            [str(BIN / args[0]), *args[1:]],
            env=env,
            cwd=cwd or self.repo,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    def live(self) -> list[dict[str, object]]:
        listed = self.run("hive", "lease", "list", "--json")
        assert listed.rc == 0, listed.err
        leases: list[dict[str, object]] = json.loads(listed.out)["leases"]
        return leases


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def floor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RouteRoster]:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("leases")))
    repo = root / "repo"
    for name in ("src/a.py", "src/b.py", "docs/x.md", "lib/c.py", "lib/d.py", "tools/t.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x\n")
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=repo)
    tree = root / "trees" / "pam"
    git("worktree", "add", "-q", "-b", "hive/pam", str(tree), cwd=repo)
    home = root / "home"
    floor = RouteRoster(home, repo, tree)
    init = floor.run("hive-office", "init", "--home", str(home))
    assert init.rc == 0, init.err
    serve = subprocess.Popen(
        [str(BIN / "hive-office"), "serve", "--home", str(home), "--no-agents"],
        env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"},
        stdout=(root / "serve.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    wait_for(lambda: (home / "run" / "control.sock").exists(), "the office to serve")
    yield floor
    serve.terminate()
    serve.wait(timeout=60)


def test_a_held_path_is_refused_to_another_agent_in_its_own_worktree(floor: RouteRoster) -> None:
    taken = floor.run("hive", "lease", "src/a.py", "--reason", "parser", agent="jim")
    assert taken.rc == 0, taken.err
    assert taken.out.startswith(f"leased src/a.py in {floor.repo} until ")
    # Pam's pattern, in her worktree, overlaps jim's file: refused with the policy's sentence.
    refused = floor.run("hive", "lease", "*.py", agent="pam", cwd=floor.tree / "src")
    assert refused.rc == 1
    assert f"src/a.py in {floor.repo} is leased by jim until " in refused.err
    assert "(parser)" in refused.err and "hive lease break PATH" in refused.err
    # What does not overlap is hers.
    ok = floor.run("hive", "lease", "docs", agent="pam", cwd=floor.tree)
    assert ok.rc == 0 and ok.out.startswith(f"leased docs in {floor.repo} until "), ok.err
    held = {(lease["holder"], lease["path"]) for lease in floor.live()}
    assert {("jim", "src/a.py"), ("pam", "docs")} <= held
    listed = floor.run("hive", "lease", "list")
    assert "jim  src/a.py in" in listed.out and "(parser)" in listed.out

    # Released by its holder only.
    assert floor.run("hive", "release", "docs", agent="jim").rc == 1
    assert floor.run("hive", "release", "docs", agent="pam").rc == 0
    assert ("pam", "docs") not in {(lease["holder"], lease["path"]) for lease in floor.live()}


def test_the_manager_and_the_person_break_leases_others_may_not(floor: RouteRoster) -> None:
    assert floor.run("hive", "lease", "lib/c.py", "lib/d.py", agent="jim").rc == 0
    refused = floor.run("hive", "lease", "break", "lib/c.py", agent="pam")
    assert refused.rc == 1 and "only the manager (michael) or the person" in refused.err
    forced = floor.run("hive", "release", "--force", "lib/c.py", agent="michael")
    assert forced.rc == 0 and "(held by jim)" in forced.out, forced.err
    broken = floor.run("hive", "lease", "break", "lib/d.py")  # the person
    assert broken.rc == 0 and "(held by jim)" in broken.out, broken.err
    paths = {lease["path"] for lease in floor.live()}
    assert not paths & {"lib/c.py", "lib/d.py"}


def test_a_lease_ends_with_its_task_and_expires(floor: RouteRoster) -> None:
    for args in (
        ("add", "Tools", "--assignee", "pete"),
        ("update", "t1", "--status", "doing"),
    ):
        assert floor.run("hive", "task", *args, agent="michael").rc == 0
    # Pete's one task in progress is recorded on the lease.
    taken = floor.run("hive", "lease", "tools", agent="pete")
    assert taken.rc == 0 and "or when t1 is done" in taken.out, taken.err
    assert floor.run("hive", "lease", "tools/t.py", agent="jim").rc == 1
    assert floor.run("hive", "task", "update", "t1", "--status", "done", agent="michael").rc == 0
    assert "tools" not in {lease["path"] for lease in floor.live()}
    assert floor.run("hive", "lease", "tools/t.py", "--ttl", "1s", agent="jim").rc == 0

    # Jim's one-second lease lapses on its own.
    wait_for(lambda: "tools/t.py" not in {lease["path"] for lease in floor.live()}, "expiry")
    assert floor.run("hive", "lease", "tools/t.py", agent="pam").rc == 0


def test_bad_input_is_a_usage_error(floor: RouteRoster) -> None:
    for args in (("lease",), ("lease", "x", "--ttl", "2d"), ("lease", "list", "x")):
        done = floor.run("hive", *args, agent="jim")
        assert done.rc == 2, done


def test_the_lease_file_is_in_the_hives_history(floor: RouteRoster) -> None:
    hive = floor.home / "hive"
    assert floor.run("hive", "lease", "src/b.py", agent="jim").rc == 0
    wait_for(
        lambda: (
            "src/b.py" in git("show", "HEAD:leases.json", cwd=hive)
            if "leases.json" in git("ls-tree", "--name-only", "HEAD", cwd=hive)
            else False
        ),
        "the committer to version leases.json",
    )


def test_archiving_an_agent_releases_its_leases(floor: RouteRoster) -> None:
    assert floor.run("hive", "lease", "src/b.py", agent="jim").rc == 0
    assert floor.run("hive", "lease", "src/b.py", agent="pam").rc == 1
    archived = floor.run("hive-office", "archive", "jim")
    assert archived.rc == 0, archived.err
    assert not [lease for lease in floor.live() if lease["holder"] == "jim"]
    assert floor.run("hive", "lease", "src/b.py", agent="pam").rc == 0
