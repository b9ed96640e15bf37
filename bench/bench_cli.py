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

Every `hive` call is attributed by the office while it runs (hive_core/caller.py), so
the bench runs the office's real control socket (control.ControlServer, with the home's
lock held as a served office holds it) and makes jim a running agent whose session
leader is this bench: each command is proven by its process ancestry and jim's secret,
as an agent's is. The cost of that proof is measured on its own too (issue 13): in
fresh interpreters that have already loaded what a mail verb loads, the time to import
hive_core.caller and get the office's answer, p50/p99. Target < 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from figures import figure

from hive_core.agents.state import AgentState, AgentStates
from hive_core.config import load_office
from hive_core.control import ControlServer
from hive_core.hive import init_office
from hive_core.ids import created_at_of, new_message_id
from hive_core.office import office_lock
from hive_core.paths import HivePaths
from hive_core.schema import ControlReply, ControlRequest, Message

PYTHON = sys.executable
HIVE = str(Path(sys.executable).parent / "hive")
TARGET = 3.0
WARMUP_ROUNDS = 3
TARGETED = ("inbox", "send", "done")
PROOF_TARGET_MS = 5.0
PROOF_REPEAT = 4  # proofs a round: enough samples for a p99
# One proof in a fresh interpreter, after what every mail verb imports anyway.
PROOF_CHILD = """
import json, sys, time
from pathlib import Path
import msgspec
from hive_core.config import load_office
from hive_core.paths import HivePaths
paths = HivePaths(Path(sys.argv[1]))
config = load_office(paths.office_toml)
start = time.perf_counter()
from hive_core.caller import identify
caller = identify(paths, config)
elapsed = time.perf_counter() - start
assert caller.who == "jim" and caller.proven, caller
print(json.dumps(elapsed))
"""


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


class AnsweringOffice:
    """The office's control socket on a thread, jim running with this process as its
    session leader (so every child of the bench is jim's), the home's lock held."""

    def __init__(self, paths: HivePaths) -> None:
        config = load_office(paths.office_toml)
        states = AgentStates(
            AgentState(spec=a, manager=a.id == config.office.manager) for a in config.agents
        )
        with states.edit("jim") as jim:
            jim.pid = os.getpid()
        self.secret = states["jim"].new_secret()
        self._lock = office_lock(paths)
        self._lock.__enter__()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = ControlServer(paths.control_socket, self._perform, agents=states)
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result()

    async def _perform(self, req: ControlRequest) -> ControlReply:
        return ControlReply(ok=False, error="only whoami here")

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
        self._lock.__exit__(None, None, None)


def measure(home: Path, runs: int) -> tuple[Times, Times, list[float]]:
    """Wall and CPU seconds of each command, `runs` interleaved rounds, in an office at
    `home`; and the seconds of proving the caller, once per round and command."""
    paths = HivePaths(home)
    init_office(paths)
    office = AnsweringOffice(paths)
    kick = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    kick.bind(str(paths.kick_socket))
    kick.setblocking(False)
    for _ in range(5):
        deliver(paths, "jim")
    kept = deliver(paths, "jim")  # read and replied to, never marked done

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HIVE_HOME=str(home), HIVE_AGENT_ID="jim", HIVE_SECRET=office.secret)

    # name -> a function giving the argv of one run (done needs a fresh message each time)
    commands: dict[str, Callable[[], list[str]]] = {
        "python -c pass": lambda: [PYTHON, "-c", "pass"],
        "inbox": lambda: [HIVE, "inbox"],
        "send": lambda: [HIVE, "send", "--to", "pam", "--subject", "Parser", "--body", "Done."],
        "done": lambda: [HIVE, "done", deliver(paths, "jim")],
        "read": lambda: [HIVE, "read", kept],
        "reply": lambda: [HIVE, "reply", kept, "--act", "agree", "--body", "On it."],
        "roster (click)": lambda: [HIVE, "roster"],
        "proof": lambda: [PYTHON, "-c", PROOF_CHILD, str(home)],
    }
    proofs: list[float] = []
    wall: Times = {name: [] for name in commands}
    cpu: Times = {name: [] for name in commands}
    for round_ in range(WARMUP_ROUNDS + runs):
        order = list(commands)
        random.shuffle(order)
        for name in [n for n in order for _ in range(PROOF_REPEAT if n == "proof" else 1)]:
            argv = commands[name]()
            start = time.perf_counter()
            out = subprocess.PIPE if name == "proof" else subprocess.DEVNULL
            child = subprocess.Popen(argv, env=env, stdout=out)
            _, status, usage = os.wait4(child.pid, 0)
            elapsed = time.perf_counter() - start
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                sys.exit(f"{name} failed with exit {child.returncode}")
            if round_ >= WARMUP_ROUNDS:
                wall[name].append(elapsed)
                cpu[name].append(usage.ru_utime + usage.ru_stime)
                if child.stdout is not None:
                    proofs.append(json.loads(child.stdout.read()))
            if child.stdout is not None:
                child.stdout.close()
        drain(kick)
    kick.close()
    office.close()
    return wall, cpu, proofs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="rounds (each command once)")
    opts = parser.parse_args()
    # A short path: the kick socket's name must fit a Unix socket address.
    with tempfile.TemporaryDirectory(prefix="hb-", dir="/tmp") as home:
        wall, cpu, proofs = measure(Path(home), opts.runs)
    commands = [name for name in wall if name != "proof"]

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
    proof_p50, proof_p99 = statistics.median(proofs) * 1000, percentile(proofs, 99) * 1000
    print(
        f"proving the caller: p50 {proof_p50:.2f} ms, p99 {proof_p99:.2f} ms ({len(proofs)} calls)"
    )
    figure(
        "Proving who calls on every `hive` call while the office runs (import hive_core.caller, "
        "control-socket round trip: SO_PEERCRED, process ancestry, secret), "
        f"{len(proofs)} fresh interpreters",
        f"p50 {proof_p50:.2f} ms, p99 {proof_p99:.2f} ms",
        target=f"< {PROOF_TARGET_MS:g} ms",
        ok=proof_p99 < PROOF_TARGET_MS,
    )
    others = ("read", "reply", "roster (click)")
    figure(
        "`hive read` / `reply` (the mail path) and `roster` (a click verb), same run",
        f"wall median {listed(ratios(others, wall, base))} of `python -c pass`",
    )


if __name__ == "__main__":
    main()
