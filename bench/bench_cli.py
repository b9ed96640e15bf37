"""Start-up cost of the `hive` verbs agents run on every mail action. Measures; asserts nothing.

    .venv/bin/python bench/bench_cli.py [--runs 30]

Each verb runs as agents run it: the console script `hive` next to this interpreter
(agents get the venv's bin folder first on PATH, hive_core/agents/supervisor.py), as
agent jim of a fresh office in /tmp, with a datagram socket bound where the office's
kick socket would be, so `send` takes the path of a running office. The reference is
`<this python> -c pass`. Every round runs each command once in a shuffled order, so
machine noise hits all alike; the ratio is median over median. Wall time is the target;
CPU time (user + system of the child) is printed beside it, as it moves less when other
work shares the machine.

PYTHONDONTWRITEBYTECODE is dropped from the children's environment and a few warm-up
rounds run first: an installed package has its bytecode compiled, and a run that
recompiles hive_core on every start would measure the compiler.

Target (issue 18): `hive inbox`, `hive send`, `hive done` median <= 3x `python -c pass`.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from figures import figure

from hive_core.hive import init_office
from hive_core.ids import created_at_of, new_message_id
from hive_core.paths import HivePaths
from hive_core.schema import Message

PYTHON = sys.executable
HIVE = str(Path(sys.executable).parent / "hive")
TARGET = 3.0
WARMUP_ROUNDS = 3
TARGETED = ("inbox", "send", "done")


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


def drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


Times = dict[str, list[float]]


def measure(home: Path, runs: int) -> tuple[Times, Times]:
    """Wall and CPU seconds of each command, `runs` interleaved rounds, in an office at `home`."""
    paths = HivePaths(home)
    init_office(paths)
    kick = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    kick.bind(str(paths.kick_socket))
    kick.setblocking(False)
    for _ in range(5):
        deliver(paths, "jim")
    kept = deliver(paths, "jim")  # read and replied to, never marked done

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HIVE_HOME=str(home), HIVE_AGENT_ID="jim")
    env.pop("HIVE_SECRET", None)

    # name -> a function giving the argv of one run (done needs a fresh message each time)
    commands: dict[str, Callable[[], list[str]]] = {
        "python -c pass": lambda: [PYTHON, "-c", "pass"],
        "inbox": lambda: [HIVE, "inbox"],
        "send": lambda: [HIVE, "send", "--to", "pam", "--subject", "Parser", "--body", "Done."],
        "done": lambda: [HIVE, "done", deliver(paths, "jim")],
        "read": lambda: [HIVE, "read", kept],
        "reply": lambda: [HIVE, "reply", kept, "--act", "agree", "--body", "On it."],
        "roster (click)": lambda: [HIVE, "roster"],
    }
    wall: Times = {name: [] for name in commands}
    cpu: Times = {name: [] for name in commands}
    for round_ in range(WARMUP_ROUNDS + runs):
        order = list(commands)
        random.shuffle(order)
        for name in order:
            argv = commands[name]()
            start = time.perf_counter()
            child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            elapsed = time.perf_counter() - start
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                sys.exit(f"{name} failed with exit {child.returncode}")
            if round_ >= WARMUP_ROUNDS:
                wall[name].append(elapsed)
                cpu[name].append(usage.ru_utime + usage.ru_stime)
        drain(kick)
    kick.close()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="rounds (each command once)")
    opts = parser.parse_args()
    # A short path: the kick socket's name must fit a Unix socket address.
    with tempfile.TemporaryDirectory(prefix="hb-", dir="/tmp") as home:
        wall, cpu = measure(Path(home), opts.runs)
    commands = list(wall)

    base = statistics.median(wall["python -c pass"])
    cpu_base = statistics.median(cpu["python -c pass"])
    print(f"{opts.runs} interleaved rounds, console script {HIVE}")
    print(
        f"{'command':<16} {'wall p50':>9} {'p90':>9} {'x pass':>7} {'cpu p50':>9} {'x pass':>7}  target"
    )
    for name in commands:
        median, cpu_median = statistics.median(wall[name]), statistics.median(cpu[name])
        target = f"wall <= {TARGET:g}x" if name in TARGETED else ""
        print(
            f"{name:<16} {median * 1000:7.1f}ms {percentile(wall[name], 90) * 1000:7.1f}ms "
            f"{median / base:6.2f}x {cpu_median * 1000:7.1f}ms {cpu_median / cpu_base:6.2f}x  {target}"
        )

    def ratios(names: tuple[str, ...], times: Times, ref: float) -> list[float]:
        return [statistics.median(times[name]) / ref for name in names]

    def listed(values: list[float], unit: str = "x") -> str:
        return " / ".join(f"{v:.2f}{unit}" for v in values)

    targeted = ratios(TARGETED, wall, base)
    figure(
        f"`hive inbox` / `send` / `done` start-up, the console script as agents run it, "
        f"{opts.runs} rounds interleaved with the venv's `python -c pass`",
        f"wall median {listed(targeted)} ("
        + " / ".join(f"{statistics.median(wall[n]) * 1000:.1f}" for n in TARGETED)
        + f" ms against {base * 1000:.1f} ms); CPU {listed(ratios(TARGETED, cpu, cpu_base))}",
        target="median <= 3x `python -c pass`",
        ok=all(ratio <= TARGET for ratio in targeted),
    )
    others = ("read", "reply", "roster (click)")
    figure(
        "`hive read` / `reply` (the mail path) and `roster` (a click verb), same run",
        f"wall median {listed(ratios(others, wall, base))} of `python -c pass`",
    )


if __name__ == "__main__":
    main()
