"""Agents' worktrees: what they cost (prints, never asserts).

  create   placing an agent in a new worktree of a repository of --files files
           (`git worktree add` + the record, hive_core/worktrees.place), median of
           --rounds fresh agents; beside it, `git ls-files` of the same repository
           (the floor: git reading its index once)
  diff     one refresh of an agent's changes for the Diff panel with --lines changed
           lines over 20 files (hive_core/worktrees.review: one git diff against the
           base, untracked files as new, parsed into files and hunks with counts);
           and the parse alone

Usage: .venv/bin/python bench/bench_worktree.py [--files 10000] [--lines 1000]
       [--rounds 5] [--quick]  (--quick: 3 rounds)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from figures import figure

from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.paths import HivePaths
from hive_core.worktrees import patch, place, read_record, review
from hive_core.worktrees.plan import parse_patch


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root: Path, files: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "Bench")
    for i in range(files):
        folder = repo / f"pkg{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i:05d}.py").write_text("".join(f"value_{i}_{n} = {n}\n" for n in range(50)))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    return repo


def office(root: Path, repo: Path, agents: int) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir()
    roster = ['[office]\nmanager = "boss"\n\n[[agents]]\nid = "boss"\nname = "Boss"\n']
    roster += [
        f'[[agents]]\nid = "a{i}"\nname = "A{i}"\nprovider = "shell"\ncwd = "{repo}"\n'
        for i in range(agents)
    ]
    paths.office_toml.write_text("\n".join(roster))
    init_office(paths)
    return paths


def timed(step: object) -> float:
    assert callable(step)
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--lines", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    root = Path(tempfile.mkdtemp(prefix="hive-bench-wt-", dir="/tmp"))
    try:
        repo = make_repo(root, args.files)
        paths = office(root, repo, rounds)
        config = load_office(paths.office_toml)
        creates, floors = [], []
        for i in range(rounds):
            spec = config.agents[i + 1]
            floors.append(timed(lambda: git(repo, "ls-files")))
            creates.append(timed(lambda spec=spec: place(paths, config, spec)))
        create = statistics.median(creates)
        floor = statistics.median(floors)
        print(f"create: {[round(c, 3) for c in creates]} s; git ls-files {floor * 1000:.1f} ms")
        figure(
            f"creating an agent's worktree in a repository of {args.files:,} files",
            f"{create:.2f} s (median of {rounds}; `git ls-files` alone {floor * 1000:.0f} ms)",
            target="<= 5 s (off the loop)",
            ok=create <= 5.0,
            command="bench/bench_worktree.py",
        )

        record = read_record(paths, "a0")
        assert record is not None
        worktree = Path(record.path)
        per_file = args.lines // 20
        for f in range(20):
            target = worktree / f"pkg{f:03d}" / f"mod{f * 100:05d}.py"
            lines = target.read_text().splitlines(keepends=True)
            # Half replaced (a - and a + each), so `per_file` changed lines per file.
            for n in range(0, min(per_file, len(lines) * 2) // 2):
                lines[n] = f"changed_{n} = {n}\n"
            target.write_text("".join(lines))

        def refresh() -> None:
            review(record)

        text = patch(record)
        changed = sum(
            1 for line in text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
        )
        refreshes = [timed(refresh) for _ in range(7)]
        parses = [timed(lambda: parse_patch(text)) for _ in range(7)]
        r, p = statistics.median(refreshes), statistics.median(parses)
        print(f"diff: {changed} changed lines; refresh {r * 1000:.1f} ms, parse {p * 1000:.2f} ms")
        figure(
            f"Diff refresh of one agent, {changed:,} changed lines (git + parse, off the loop)",
            f"{r * 1000:.0f} ms (parse alone {p * 1000:.1f} ms)",
            target="<= 250 ms",
            ok=r <= 0.25,
            command="bench/bench_worktree.py",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
