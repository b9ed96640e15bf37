"""How fast the hive's `.git` grows (prints, never asserts).

Two offices side by side in one run, each an in-process Office (no agent CLIs) on a
hive whose log.jsonl already holds --log-mb of realistic route lines:

  before  the committer as it was: log.jsonl re-committed whole, no gc
  after   log rotation into segments (hive_core/logfile.py) and `git gc --auto`

Each office then gets, in turn:
  burst    1,000 messages at --rate per second between 15 agents; growth of .git
           (disk usage) per 1,000 messages, then after one `git gc --auto` pass (what
           the committer runs every GC_EVERY s; `before` never runs it)
  trickle  --trickle messages, each committed before the next: the growth of one
           commit, scaled to one message a minute for an hour
  idle     --idle-seconds with nothing happening (the full sweep runs every 60 s),
           scaled to an hour

Usage: .venv/bin/python bench/bench_git_growth.py [--log-mb 5] [--rate 50] [--trickle 10]
       [--idle-seconds 65] [--quick]  (--quick: 2 MB log, 600 msgs, 5 trickles, 20 s idle)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import msgspec
from figures import figure

from hive_core.cli import hive
from hive_core.committer import GC_EVERY, commit_all
from hive_core.hive import init_office
from hive_core.ids import new_message_id, utc_now_iso
from hive_core.kick import kick
from hive_core.logfile import LOG_ROTATE_BYTES
from hive_core.mail import write_draft
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import Draft, LogEvent

AGENTS = [f"a{n:02d}" for n in range(15)]


def roster() -> str:
    return f'[office]\nmanager = "{AGENTS[0]}"\n' + "".join(
        f'\n[[agents]]\nid = "{a}"\nname = "{a}"\nprovider = "shell"\n' for a in AGENTS
    )


def make_home(root: Path, log_mb: float) -> HivePaths:
    home = root / "home"
    home.mkdir()
    (home / "office.toml").write_text(roster())
    paths = HivePaths(home)
    init_office(paths)
    # Lines as the router writes them: distinct ids and times, so they compress as a
    # real log does.
    lines = []
    size = 0
    n = 0
    while size < log_mb * 1e6:
        sender, to = AGENTS[n % 15], AGENTS[(n * 7 + 1) % 15]
        event = LogEvent(
            ts=utc_now_iso(),
            kind="route",
            msg=new_message_id(),
            sender=sender,
            to=to,
            recipients=[to],
            detail=f"request: step {n} of the plan",
        )
        line = msgspec.json.encode(event) + b"\n"
        lines.append(line)
        size += len(line)
        n += 1
    paths.log.write_bytes(b"".join(lines))
    commit_all(paths.hive, "office: initialised")
    return paths


def git_disk_usage(hive: Path) -> int:
    """Bytes on disk under .git (blocks, as `du` counts them)."""
    total = 0
    for folder, _dirs, files in os.walk(hive / ".git"):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def commits(hive: Path) -> int:
    out = subprocess.run(
        ["git", "-C", str(hive), "rev-list", "--count", "HEAD"], capture_output=True, text=True
    )
    return int(out.stdout.strip() or 0)


class Running:
    """An Office on its own loop in a thread; `rotate=False` is the committer before."""

    def __init__(self, paths: HivePaths, *, rotate: bool) -> None:
        self.paths = paths
        self.office = Office(paths, agents=False, program=hive)
        if not rotate:
            self.office.committer.before_commit = None
            self.office.committer.gc_every = None
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not paths.kick_socket.exists():
            if time.monotonic() > deadline:
                sys.exit("the office did not start")
            time.sleep(0.02)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.office.run(self.stop))

    def send(self, n: int) -> None:
        sender, to = AGENTS[n % 15], AGENTS[(n * 7 + 1) % 15]
        write_draft(self.paths.mailbox(sender), Draft(to=to, body=f"message {n}: on it"))
        kick(self.paths, sender)

    def settled(self, timeout: float = 120) -> None:
        """Every outbox empty and nothing left to commit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = any(
                any(p.suffix == ".json" for p in self.paths.mailbox(a).outbox.iterdir())
                for a in AGENTS
            )
            if not waiting and not self.office.committer.pending:
                # One more commit interval: the last touch may be in flight.
                time.sleep(0.6)
                if not self.office.committer.pending:
                    return
            time.sleep(0.05)
        sys.exit("the office did not settle")

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=60)


def kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"


def mib(n: float) -> str:
    return f"{n / 1024 / 1024:,.1f} MiB"


def measure(root: Path, *, rotate: bool, args: argparse.Namespace) -> dict[str, float]:
    paths = make_home(root, args.log_mb)
    office = Running(paths, rotate=rotate)
    try:
        office.settled()
        start_size, start_commits = git_disk_usage(paths.hive), commits(paths.hive)
        period = 1 / args.rate
        t0 = time.monotonic()
        for n in range(args.messages):
            office.send(n)
            time.sleep(max(0.0, t0 + (n + 1) * period - time.monotonic()))
        office.settled()
        burst = git_disk_usage(paths.hive) - start_size
        burst_commits = commits(paths.hive) - start_commits
        if rotate:
            office.office.committer.collect_garbage()
        after_gc = git_disk_usage(paths.hive) - start_size

        before = git_disk_usage(paths.hive)
        for n in range(args.trickle):
            office.send(args.messages + n)
            office.settled()
        per_commit = (git_disk_usage(paths.hive) - before) / args.trickle

        before = git_disk_usage(paths.hive)
        time.sleep(args.idle_seconds)
        idle = (git_disk_usage(paths.hive) - before) * 3600 / args.idle_seconds
    finally:
        office.close()
    return {
        "burst": burst * 1000 / args.messages,
        "commits": burst_commits,
        "after_gc": after_gc * 1000 / args.messages,
        "per_commit": per_commit,
        "trickle_hour": per_commit * 60,
        "idle_hour": idle,
        "live_log": paths.log.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-mb", type=float, default=5.0)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--trickle", type=int, default=10)
    parser.add_argument("--idle-seconds", type=float, default=65.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.log_mb, args.messages, args.trickle, args.idle_seconds = 2.0, 600, 5, 20.0
    if shutil.which("git") is None:
        sys.exit("git is not installed: gc cannot run")

    results = {}
    for name, rotate in (("before", False), ("after", True)):
        root = Path(tempfile.mkdtemp(prefix=f"hive-git-{name}-", dir="/tmp"))
        try:
            results[name] = measure(root, rotate=rotate, args=args)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    b, a = results["before"], results["after"]
    print(
        f"a {args.log_mb:g} MB log.jsonl, {args.messages} messages at {args.rate:g}/s, "
        f"15 agents; rotation at {mib(LOG_ROTATE_BYTES)}, gc every {GC_EVERY:g} s"
    )
    for name, r in results.items():
        print(
            f"  {name:6}  per 1,000 messages {mib(r['burst'])} ({r['commits']:.0f} commits), "
            f"after gc {mib(r['after_gc'])}; one commit {kib(r['per_commit'])}; "
            f"idle {kib(r['idle_hour'])}/h; live log {mib(r['live_log'])}"
        )
    figure(
        f".git growth per 1,000 messages, {args.log_mb:g} MB log, {args.rate:g} msg/s",
        f"{mib(a['burst'])} with log rotation, {mib(a['after_gc'])} after a `git gc --auto` "
        f"pass; before: {mib(b['burst'])} ({b['burst'] / max(a['after_gc'], 1):.0f}x)",
        command="bench/bench_git_growth.py",
    )
    figure(
        f"same, an office with a {args.log_mb:g} MB log: idle, and one message a minute",
        f"idle {kib(a['idle_hour'])}/h (before {kib(b['idle_hour'])}/h); a message a minute "
        f"{mib(a['trickle_hour'])}/h before gc (before {mib(b['trickle_hour'])}/h: "
        f"{kib(b['per_commit'])} per commit)",
        command="bench/bench_git_growth.py",
    )


if __name__ == "__main__":
    main()
