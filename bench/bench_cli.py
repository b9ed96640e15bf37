"""`hive` verbs as agents run them, from a regular install, the office running. Measures;
asserts nothing.

    .venv/bin/python bench/bench_cli.py [--runs 30] [--venv DIR]

What users run is a wheel installed in a venv, not this editable checkout: the
checkout's import hook runs in every interpreter of its venv and slows `python -c pass`
itself (from about 15 to about 30 ms here), which halves every ratio. So the bench
builds a wheel of this checkout (`pip wheel --no-deps`), installs it in a fresh venv
(`python -m venv`, `pip install --upgrade pip` as scripts/setup does, then `pip install
WHEEL`, its dependencies from PyPI or pip's cache;
with --venv DIR that venv is kept for the next run, which only reinstalls the wheel),
and starts an office from it (`hive-office serve --no-agents`) in a home in /tmp.

Each command is that venv's console script `hive`, acting as jim: a desk that is not
running, so the bench's process (the person's) acts for it, with the same proof and the
same verb an agent's own call gets. The reference is that venv's `python -c pass`, and
its own start time is printed. Every round runs each command once in a shuffled order,
so machine noise hits all alike; a ratio is median over median. Wall time is the
target; CPU time (user + system of the child) is printed beside it. Beside the thin
client, the full `hive` in the caller's process (`main(argv)`: what every call cost
before issue 25, and what a verb costs with no office) for `inbox`.

PYTHONDONTWRITEBYTECODE is dropped from the children's environment and a few warm-up
rounds run first: the install has its bytecode compiled.

Target (issue 25): `hive inbox`, `send`, `done` median <= 1.5x `python -c pass` of the
same install.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
from figures import figure, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from hive_core.hive import init_office  # noqa: E402
from hive_core.ids import created_at_of, new_message_id  # noqa: E402
from hive_core.paths import HivePaths  # noqa: E402
from hive_core.schema import Message  # noqa: E402

TARGET = 1.5
WARMUP_ROUNDS = 3
TARGETED = ("inbox", "send", "done")
ROSTER = """[office]
manager = "michael"

[[agents]]
id = "michael"
name = "Michael"
provider = "shell"

[[agents]]
id = "jim"
name = "Jim"
provider = "shell"

[[agents]]
id = "pam"
name = "Pam"
provider = "shell"
"""
# The full `hive`, in the calling process (main given its words runs them there).
FULL = "import sys; from hive_core.cli.hive import main; main(sys.argv[1:])"


def install(venv: Path, fresh: bool, *, source: Path = ROOT, extras: str = "") -> Path:
    """`source` (this checkout) as a wheel, installed in `venv` (made if missing) with
    `extras` ("semantic"); its bin folder."""
    with tempfile.TemporaryDirectory(prefix="hive-wheel-") as dist:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, str(source)],
            check=True,
        )
        (built,) = Path(dist).glob("hive_office-*.whl")
        wheel = f"{built}[{extras}]" if extras else str(built)
        if fresh or not (venv / "bin" / "python").exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            # As scripts/setup, pipx and uv do: a current pip writes the console script.
            # pip 23's (Python 3.11's ensurepip) imports `re` in it, a third of an
            # interpreter's start on every call.
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
            subprocess.run([*pip, "--upgrade", "pip"], check=True)
            subprocess.run([*pip, wheel], check=True)
        else:
            pip = [str(venv / "bin" / "pip"), "install", "-q"]
            subprocess.run([*pip, "--force-reinstall", "--no-deps", str(built)], check=True)
            if extras:  # a kept venv made without them gets them now
                subprocess.run([*pip, wheel], check=True)
    return venv / "bin"


def deliver(paths: HivePaths, to: str) -> str:
    """A routed message straight into `to`'s inbox, as the router would leave it."""
    message_id = new_message_id()
    message = Message(
        id=message_id,
        conversation=message_id,
        in_reply_to=None,
        sender="pam",
        to=to,
        act="request",
        subject="Review the parser",
        body="See src/parser.py, lines 10-80. " * 4,
        created_at=created_at_of(message_id),
    )
    (paths.mailbox(to).inbox / f"{message_id}.json").write_bytes(msgspec.json.encode(message))
    return message_id


@contextmanager
def office(bin_dir: Path, paths: HivePaths) -> Iterator[None]:
    """`hive-office serve` of the installed venv, until the block ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    log = (paths.home.parent / "serve.out").open("wb")
    proc = subprocess.Popen(
        [bin_dir / "hive-office", "serve", "--home", str(paths.home), "--no-agents"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not paths.control_socket.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(
                    f"the office did not start: {(paths.home.parent / 'serve.out').read_text()}"
                )
            time.sleep(0.05)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()


Times = dict[str, list[float]]


def measure(bin_dir: Path, home: Path, runs: int) -> tuple[Times, Times]:
    """Wall and CPU seconds of each command, `runs` interleaved rounds."""
    paths = HivePaths(home / "home")
    paths.home.mkdir()
    paths.office_toml.write_text(ROSTER)
    init_office(paths)
    python, hive = str(bin_dir / "python"), str(bin_dir / "hive")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in env.items() if not k.startswith("HIVE_")}
    env.update(HIVE_HOME=str(paths.home), HIVE_AGENT_ID="jim")
    wall: Times = {}
    cpu: Times = {}
    with office(bin_dir, paths):
        for _ in range(5):
            deliver(paths, "jim")
        kept = deliver(paths, "jim")  # read and replied to, never marked done
        # name -> the argv of one run (done needs a fresh message each time)
        commands: dict[str, Callable[[], list[str]]] = {
            "python -c pass": lambda: [python, "-c", "pass"],
            "inbox": lambda: [hive, "inbox"],
            "send": lambda: [hive, "send", "--to", "pam", "--subject", "Parser", "--body", "Done."],
            "done": lambda: [hive, "done", deliver(paths, "jim")],
            "read": lambda: [hive, "read", kept],
            "reply": lambda: [hive, "reply", kept, "--act", "agree", "--body", "On it."],
            "roster (click)": lambda: [hive, "roster"],
            "inbox, full hive": lambda: [python, "-c", FULL, "inbox"],
        }
        wall = {name: [] for name in commands}
        cpu = {name: [] for name in commands}
        for round_ in range(WARMUP_ROUNDS + runs):
            order = list(commands)
            random.shuffle(order)
            for name in order:
                argv = commands[name]()
                start = time.perf_counter()
                child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(child.pid, 0)
                elapsed = time.perf_counter() - start
                code = os.waitstatus_to_exitcode(status)
                child.returncode = code
                if code != 0:
                    sys.exit(f"{name} failed with exit {code}")
                if round_ >= WARMUP_ROUNDS:
                    wall[name].append(elapsed)
                    cpu[name].append(usage.ru_utime + usage.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="rounds (each command once)")
    parser.add_argument(
        "--venv", type=Path, help="keep the install's venv here (default: a fresh one)"
    )
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hb-", dir="/tmp") as scratch:
        venv = opts.venv or Path(scratch) / "venv"
        bin_dir = install(venv, fresh=opts.venv is None)
        wall, cpu = measure(bin_dir, Path(scratch), opts.runs)

    base = statistics.median(wall["python -c pass"])
    cpu_base = statistics.median(cpu["python -c pass"])
    print(f"{opts.runs} interleaved rounds, console script {bin_dir / 'hive'} (a wheel install)")
    print(
        f"{'command':<18} {'wall p50':>9} {'p90':>9} {'x pass':>7} {'cpu p50':>9} {'x pass':>7}  target"
    )
    for name in wall:
        median, cpu_median = statistics.median(wall[name]), statistics.median(cpu[name])
        target = f"wall <= {TARGET:g}x" if name in TARGETED else ""
        print(
            f"{name:<18} {median * 1000:7.1f}ms {percentile(wall[name], 0.9) * 1000:7.1f}ms "
            f"{median / base:6.2f}x {cpu_median * 1000:7.1f}ms {cpu_median / cpu_base:6.2f}x  {target}"
        )

    def ratios(names: tuple[str, ...], times: Times, ref: float) -> list[float]:
        return [statistics.median(times[name]) / ref for name in names]

    def listed(values: list[float], unit: str = "x") -> str:
        return " / ".join(f"{v:.2f}{unit}" for v in values)

    targeted = ratios(TARGETED, wall, base)
    figure(
        f"`hive inbox` / `send` / `done`, the office running, a wheel install's console "
        f"script, {opts.runs} rounds interleaved with that venv's `python -c pass` "
        f"({base * 1000:.1f} ms)",
        f"wall median {listed(targeted)} ("
        + " / ".join(f"{statistics.median(wall[n]) * 1000:.1f}" for n in TARGETED)
        + f" ms against {base * 1000:.1f} ms); CPU {listed(ratios(TARGETED, cpu, cpu_base))}",
        target=f"median <= {TARGET:g}x `python -c pass`",
        ok=all(ratio <= TARGET for ratio in targeted),
    )
    others = ("read", "reply", "roster (click)", "inbox, full hive")
    figure(
        "`hive read` / `reply` / `roster` through the office, and `inbox` run in the "
        "caller's process (the full `hive`, as before issue 25), same run",
        f"wall median {listed(ratios(others, wall, base))} of `python -c pass`",
    )


if __name__ == "__main__":
    main()
