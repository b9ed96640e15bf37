"""What containing a desk costs (issue 24): start-up and the hook round trip, with and
without the Landlock domain (hive_core/desks/contain.py). Measures; asserts nothing.

    .venv/bin/python bench/bench_contain.py [shell|hook|claude|all] [--runs 30]
                                            [--claude-runs 8] [--agents 5] [--quick]

  shell   A shell desk's start-up: from the office's decision to start it to bash's first
          prompt on its pty, in this process as the supervisor does it (PtySession on
          its spawner thread). Contained, that time includes working out the desk's rules
          from a real office layout of --agents desks with worktrees (desk_folders,
          listings, plan), building the ruleset and entering it in the child; beside the
          total, those two parts alone. Runs alternate, so noise hits both alike.
  hook    The hook round trip as a desk pays it: cth-hook started with a Stop event,
          its frame to a socket in the office's run/ folder that replies at once, to its
          exit; from a driver process inside the desk's Landlock domain and from one
          outside it (the office's answer itself does not depend on the domain, see
          bench_hook.py for that part). Batches alternate.
  claude  A claude desk's start-up to its SessionStart hook: a real `hive-office serve`
          with one claude desk against the scripted Messages API, the desk archived and
          spawned again `--claude-runs` times, from the spawn request to the desk idle
          (its SessionStart reached the office), once with contain = true and once false.

--quick (bench/run_all): 15 runs, 4 claude runs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from figures import figure, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_hook import STOP_EVENT, serve  # noqa: E402

from hive_core.agents.provider import hook_command  # noqa: E402
from hive_core.desks import contain  # noqa: E402
from hive_core.desks.pty_session import PtySession  # noqa: E402
from hive_core.hive import init_office  # noqa: E402
from hive_core.paths import HivePaths  # noqa: E402
from tests.claude_office import ClaudeOffice  # noqa: E402

PROMPT = "READY-4c1e$ "


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.1f} ms (p90 {percentile(samples, 0.9) * 1e3:.1f})"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def layout(root: Path, agents: int) -> tuple[HivePaths, Path, list[str]]:
    """An office home of `agents` shell desks in one repository, each with its memory,
    and a worktree for the first (the desk measured)."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(
        repo,
        "-c",
        "user.email=p@e",
        "-c",
        "user.name=P",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    )
    ids = [f"desk{i}" for i in range(agents)]
    paths = HivePaths(root / "home")
    paths.home.mkdir()
    paths.office_toml.write_text(
        '[office]\nmanager = "desk0"\n'
        + "".join(f'\n[[agents]]\nid = "{a}"\nname = "{a}"\nprovider = "shell"\n' for a in ids)
    )
    init_office(paths)
    for a in ids:
        paths.mailbox(a).notes.parent.mkdir(parents=True, exist_ok=True)
        paths.mailbox(a).notes.write_text(f"{a}'s notes\n")
    desk = paths.worktree(ids[1])
    git(repo, "worktree", "add", "-q", "-b", f"hive/bench/{ids[1]}", str(desk))
    paths.desk_tmp(ids[1]).mkdir(parents=True)
    return paths, desk, ids


def desk_plan(paths: HivePaths, desk: Path, ids: list[str], env: dict[str, str]) -> contain.Plan:
    folders = contain.desk_folders(paths, ids[1], "shell", desk, ids, env)
    return contain.plan(folders, contain.listings(contain.to_list(folders.hidden)))


async def start_once(
    paths: HivePaths, desk: Path, ids: list[str], env: dict[str, str], contained: bool
) -> tuple[float, float, float]:
    """(total, planning, spawn) seconds of one shell desk's start to its first prompt."""
    loop = asyncio.get_running_loop()
    seen = bytearray()
    ready = asyncio.Event()

    def output(data: bytes) -> None:
        seen.extend(data)
        if PROMPT.encode() in seen:
            ready.set()

    started = time.perf_counter()
    confine = None
    if contained:
        confine = (await asyncio.to_thread(desk_plan, paths, desk, ids, env)).grants
    planned = time.perf_counter()
    session = await PtySession.start(
        ["bash", "--norc", "--noprofile", "-i"], env=env, cwd=desk, confine=confine
    )
    spawned = time.perf_counter()
    session.attach(loop, output, lambda code, sig: ready.set())
    await asyncio.wait_for(ready.wait(), 30)
    total = time.perf_counter() - started
    if PROMPT.encode() not in seen:
        raise SystemExit(f"bash exited before its prompt: {bytes(seen)!r}")
    await session.terminate()
    return total, planned - started, spawned - planned


def shell_part(runs: int, agents: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-contain-") as tmp:
        paths, desk, ids = layout(Path(tmp), agents)
        env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "PS1": PROMPT}
        env["TERM"] = "xterm-256color"
        plan = desk_plan(paths, desk, ids, env)
        print(f"shell desk start-up, {runs} runs each, alternating ({agents} desks' layout,")
        print(f"  {len(plan.grants)} Landlock rules for the desk)")

        async def runs_of() -> dict[str, list[tuple[float, float, float]]]:
            results: dict[str, list[tuple[float, float, float]]] = {"off": [], "on": []}
            for i in range(runs * 2):
                mode = "on" if i % 2 else "off"
                results[mode].append(await start_once(paths, desk, ids, env, mode == "on"))
            return results

        results = asyncio.run(runs_of())
    off = [r[0] for r in results["off"]]
    on = [r[0] for r in results["on"]]
    planning = [r[1] for r in results["on"]]
    spawn_on = [r[2] for r in results["on"]]
    spawn_off = [r[2] for r in results["off"]]
    print(f"  uncontained: spawn to first prompt {ms(off)}")
    print(f"  contained:   spawn to first prompt {ms(on)}")
    print(f"    of which the rules (folders, listings, plan) {ms(planning)}")
    print(
        f"    and the spawn (ruleset built, entered, exec) {ms(spawn_on)} against {ms(spawn_off)}"
    )
    figure(
        "shell desk start-up to first prompt, uncontained / contained (p50)",
        f"{statistics.median(off) * 1e3:.1f} / {statistics.median(on) * 1e3:.1f} ms",
        command="bench/bench_contain.py shell",
    )
    figure(
        "containment's rules for one desk (folders, listings, plan; p50)",
        f"{statistics.median(planning) * 1e3:.1f} ms, {len(plan.grants)} rules",
        command="bench/bench_contain.py shell",
    )


DRIVER = """
import json, subprocess, sys, time
cmd, runs, event = json.loads(sys.argv[1]), int(sys.argv[2]), sys.stdin.buffer.read()
out = []
for _ in range(runs):
    t = time.perf_counter()
    done = subprocess.run(cmd, input=event, capture_output=True)
    out.append(time.perf_counter() - t)
    if done.returncode != 0 or b"block" not in done.stdout:
        sys.exit(f"the shim failed: {done.returncode} {done.stdout!r} {done.stderr!r}")
print(json.dumps(out))
"""


def hook_part(runs: int, agents: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-contain-") as tmp:
        paths, desk, ids = layout(Path(tmp), agents)
        paths.run.mkdir(exist_ok=True)
        sock_path = paths.run / "bench-hook.sock"
        listener = serve(str(sock_path), reply=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        env.update(HIVE_AGENT_ID=ids[1], HIVE_SECRET="s", HIVE_SOCKET=str(sock_path))
        grants = desk_plan(paths, desk, ids, env).grants
        version = contain.abi()

        def batch(contained: bool, count: int) -> list[float]:
            ruleset = contain.ruleset(grants, version) if contained else None
            try:
                done = subprocess.run(
                    [sys.executable, "-c", DRIVER, json.dumps(hook_command()), str(count)],
                    input=STOP_EVENT,
                    capture_output=True,
                    env=env,
                    cwd=desk,
                    pass_fds=() if ruleset is None else (ruleset,),
                    preexec_fn=None if ruleset is None else (lambda: contain.enter(ruleset)),
                )
            finally:
                if ruleset is not None:
                    os.close(ruleset)
            if done.returncode != 0:
                raise SystemExit(done.stderr.decode())
            samples: list[float] = json.loads(done.stdout)
            return samples

        results: dict[bool, list[float]] = {False: [], True: []}
        per = max(runs // 5, 1)
        for i in range(10):
            results[bool(i % 2)].extend(batch(bool(i % 2), per))
        listener.close()
    off, on = results[False], results[True]
    print(f"\nhook round trip (cth-hook, Stop event, to its exit), {len(off)} runs each:")
    print(f"  uncontained {ms(off)}")
    print(f"  contained   {ms(on)}")
    figure(
        "hook round trip, uncontained / contained (p50)",
        f"{statistics.median(off) * 1e3:.1f} / {statistics.median(on) * 1e3:.1f} ms",
        command="bench/bench_contain.py hook",
    )


def stopped(office: ClaudeOffice) -> bool:
    return office.registry()["michael"].get("pid") is None


def idle(office: ClaudeOffice) -> bool:
    """Its SessionStart reached the office (a claude desk is offline until then)."""
    return bool(office.registry()["michael"]["status"] == "idle")


def claude_part(runs: int) -> None:
    from tests.claude_office import CLAUDE, make_claude_office, serving
    from tests.support import wait_for

    if CLAUDE is None:
        print("\nclaude: not installed (scripts/setup); skipped")
        return
    results: dict[bool, list[float]] = {False: [], True: []}
    with ExitStack() as stack:
        offices = {}
        for contained in (False, True):
            root = Path(tempfile.mkdtemp(prefix="bc-", dir="/tmp"))
            stack.callback(shutil.rmtree, root, ignore_errors=True)
            office = make_claude_office(root, {}, agents=("michael",))
            toml = office.home / "office.toml"
            line = f"[office]\ncontain = {str(contained).lower()}\n"
            toml.write_text(toml.read_text().replace("[office]\n", line, 1))
            stack.enter_context(serving(office, root / "serve.log"))
            why = office.run("hive-office", "why", "--home", str(office.home), "michael").stdout
            assert ("uncontained" in why) != contained, why
            offices[contained] = office
        # Alternating, both offices up all along: noise hits both alike.
        for i in range(runs * 2):
            contained = bool(i % 2)
            office, home = offices[contained], str(offices[contained].home)
            office.run("hive-office", "archive", "--home", home, "michael")
            wait_for(functools.partial(stopped, office), "archived")
            started = time.perf_counter()
            office.run("hive-office", "spawn", "--home", home, "michael")
            wait_for(
                functools.partial(idle, office),
                "SessionStart",
                timeout=60,
            )
            results[contained].append(time.perf_counter() - started)
    off, on = results[False], results[True]
    print(f"\nclaude desk: spawn to its SessionStart at the office, {runs} runs each:")
    print(f"  uncontained {ms(off)}")
    print(f"  contained   {ms(on)}")
    figure(
        "claude desk start-up to SessionStart, uncontained / contained (p50)",
        f"{statistics.median(off) * 1e3:.0f} / {statistics.median(on) * 1e3:.0f} ms",
        command="bench/bench_contain.py claude",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "part", nargs="?", default="all", choices=["shell", "hook", "claude", "all"]
    )
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--claude-runs", type=int, default=8)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.claude_runs = 15, 4
    why = contain.unavailable(contain.abi())
    if why is not None:
        raise SystemExit(f"nothing to measure: {why}")
    if args.part in ("shell", "all"):
        shell_part(args.runs, args.agents)
    if args.part in ("hook", "all"):
        hook_part(args.runs, args.agents)
    if args.part in ("claude", "all"):
        claude_part(args.claude_runs)


if __name__ == "__main__":
    main()
