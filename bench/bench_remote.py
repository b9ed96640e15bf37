"""Remote desks over OpenSSH (issue 17) against local ones. Measures; asserts nothing.

    .venv/bin/python bench/bench_remote.py [latency|idle|all] [--runs 100] [--desks 50]
                                           [--hosts 5] [--idle-seconds 30] [--quick]

"The remote host" is this machine under a private sshd on 127.0.0.1 (tests/sshd_support.py),
so a remote desk's traffic crosses a real ssh connection and its -R forwards, and the host's
paths are readable here. The host's `hive` and `cth-hook` are this venv's (remote_venv).

  latency  A real `hive-office serve` with local shell desks michael (manager) and oscar and
           a remote shell desk pam. Each desk's environment is read from its bash
           (/proc/<pid>/environ: the local bash under the office, the remote one under sshd),
           and each command below runs with it, `runs` rounds, every round each command once
           in a shuffled order so machine noise hits all alike:
             - cth-hook as agents run it (`python -I -S cth_hook/__main__.py`) with a Stop
               event, to its exit: HIVE_SOCKET is the office's hook socket for michael, the
               forwarded socket in pam's private folder on the host for pam;
             - the same frame written straight to that socket (no interpreter start), to
               its reply: what the ssh forward itself adds;
             - `hive send --to oscar` (the console script), to its exit, and from its exit
               to the file landing in oscar's inbox: the local one as the person (this
               process is no desk's, and a running desk's secret proves nothing outside
               it: control.py), pam's sent over the forwarded control socket; the office
               runs both (hive_core/office/verbs.py), pam's as pam.
           p50/p99 each, the ratio remote/local. Target (issue 25): remote `hive send`
           <= 1.2x local.
  idle     An office of N remote shell desks (one ssh connection each, spread over H
           sshd instances), all running, then its CPU over S idle seconds: the office
           process alone and, apart, the sum of its ssh children (and what the host side,
           sshd and the remote shells, used). Beside it, an office of N local shell desks.
           Target: the office process < 1% of one core, as for a local idle office
           (bench_route.py idle).

--quick (bench/run_all): 20 rounds, 10 desks over 2 sshd, 10 s idle.
The remote folders made under $HOME/.hive-remote/ (one per office, named by
hive_core/remote/plan.office_key) are removed afterwards; no other is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from figures import figure, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import cth_hook.__main__ as shim  # noqa: E402
from hive_core.remote import plan  # noqa: E402
from tests.serve_support import ServedOffice  # noqa: E402
from tests.sshd_support import SshHost, running_sshd, sshd_binary  # noqa: E402
from tests.support import wait_for  # noqa: E402

PYTHON = sys.executable
BIN = Path(sys.executable).parent
HIVE = str(BIN / "hive")
SHELL = '["bash", "--norc", "--noprofile", "-i"]'
WARMUP_ROUNDS = 2
IDLE_TARGET = 1.0  # percent of one core, as for a local idle office
SEND_TARGET = 1.2  # remote `hive send` over local, p50
TICK = os.sysconf("SC_CLK_TCK")
STOP_EVENT = json.dumps(
    {
        "session_id": "0f6c5d3e-9a1b-4c2d-8e7f-123456789abc",
        "transcript_path": "/tmp/session.jsonl",
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "Done.",
    }
).encode()


# --- offices ---------------------------------------------------------------------------


def local_desk(agent: str) -> str:
    return (
        f'\n[[agents]]\nid = "{agent}"\nname = "{agent}"\nprovider = "shell"\ncommand = {SHELL}\n'
    )


def remote_desk(agent: str, host: SshHost, cwd: Path) -> str:
    return (
        f'\n[[agents]]\nid = "{agent}"\nname = "{agent}"\nprovider = "shell"\n'
        f'host = "{host.alias}"\nssh_args = {json.dumps(host.ssh_args)}\ncwd = "{cwd}"\n'
        f"command = {SHELL}\n"
    )


def roster(manager: str, desks: str) -> str:
    # The host's venv is this one: its `hive` and `cth-hook` are the ones measured.
    return f'[office]\nmanager = "{manager}"\nremote_venv = "{sys.prefix}"\n' + desks


def running(office: ServedOffice, agents: list[str]) -> bool:
    registry = office.registry()
    if not office.running():
        raise SystemExit(f"the office exited: {office.log.read_text()[-2000:]}")
    return all(
        registry.get(a, {}).get("status") in ("running", "idle") and office.starts(a)
        for a in agents
    )


@contextmanager
def office_up(home: Path, text: str, agents: list[str], timeout: float) -> Iterator[ServedOffice]:
    """A served office with every desk running; stopped, and its folders on the host
    removed, afterwards."""
    office = ServedOffice(home, roster=text)
    remote_dirs = Path.home() / plan.REMOTE_ROOT / plan.office_key(office.home)
    started = time.monotonic()
    office.start()
    try:
        wait_for(lambda: running(office, agents), f"{len(agents)} desks to run", timeout)
        print(
            f"  {len(agents)} desks running {time.monotonic() - started:.1f} s after start",
            file=sys.stderr,
        )
        yield office
    finally:
        if office.running():
            code = office.stop()
            if code:
                print(f"serve exited {code}: {office.log.read_text()[-2000:]}", file=sys.stderr)
        shutil.rmtree(remote_dirs, ignore_errors=True)


# --- processes -------------------------------------------------------------------------


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(
        item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if b"=" in item
    )


def stat_of(pid: int) -> tuple[str, int, float] | None:
    """(comm, ppid, cpu seconds user + system) of a process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def desk_bash(agent: str, match: Callable[[dict[str, str]], bool]) -> int:
    """The pid of the bash that is `agent`'s desk (its environment says so)."""

    def find() -> int | None:
        for pid in sorted(pids()):
            found = stat_of(pid)
            if found and found[0] == "bash":
                env = environ(pid)
                if env.get("HIVE_AGENT_ID") == agent and match(env):
                    return pid
        return None

    return wait_for(find, f"{agent}'s bash")


def descendants(roots: list[int]) -> dict[int, tuple[str, float]]:
    """Every process under `roots` (not the roots): pid -> (comm, cpu seconds)."""
    table = {pid: found for pid in pids() if (found := stat_of(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    under: dict[int, tuple[str, float]] = {}
    todo = [c for r in roots for c in children.get(r, [])]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in under:
            under[pid] = (table[pid][0], table[pid][2])
            todo += children.get(pid, [])
    return under


def cpu_of(pid: int) -> float:
    found = stat_of(pid)
    return found[2] if found else 0.0


# --- latency ---------------------------------------------------------------------------


def exchange(path: str, frame: bytes) -> float:
    """One hook frame straight to a hook socket: the time to its reply (checked)."""
    started = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(frame)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise SystemExit(f"the office closed {path} without a reply: the frame was refused")
            reply += chunk
    took = time.perf_counter() - started
    if "exit" not in json.loads(reply):
        raise SystemExit(f"the office's hook reply on {path} is not one: {reply!r}")
    return took


def json_names(folder: Path) -> int:
    return sum(1 for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))


def run_to_exit(argv: list[str], env: dict[str, str], cwd: str, stdin: bytes | None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return took


def bench_latency(runs: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="hbr-", dir="/tmp"))  # short: socket paths
    try:
        with running_sshd(root / "sshd") as host:
            work = root / "work"
            work.mkdir()
            text = roster(
                "michael",
                local_desk("michael") + local_desk("oscar") + remote_desk("pam", host, work),
            )
            with office_up(root / "office", text, ["michael", "oscar", "pam"], 120) as office:
                measure_latency(office, runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure_latency(office: ServedOffice, runs: int) -> None:
    home = str(office.home)
    rdir = plan.rdir_of(str(Path.home()), plan.office_key(office.home), "pam")
    local = desk_bash("michael", lambda env: env.get("HIVE_HOME") == home)
    remote = desk_bash("pam", lambda env: env.get("HIVE_SOCKET") == f"{rdir}/hook.sock")
    envs, cwds = {}, {}
    for side, pid in (("local", local), ("remote", remote)):
        env = environ(pid)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # an agent's `hive` runs compiled bytecode
        if not (env.get("HIVE_SECRET") and env.get("HIVE_SOCKET")):
            raise SystemExit(f"the {side} desk's bash has no HIVE_SECRET/HIVE_SOCKET: {env}")
        envs[side], cwds[side] = env, os.readlink(f"/proc/{pid}/cwd")
    print(
        f"local desk michael: bash {local}, HIVE_SOCKET {envs['local']['HIVE_SOCKET']}\n"
        f"remote desk pam: bash {remote} (under sshd), HIVE_SOCKET {envs['remote']['HIVE_SOCKET']},"
        f" HIVE_CONTROL {envs['remote'].get('HIVE_CONTROL')}, HIVE_REMOTE"
        f" {envs['remote'].get('HIVE_REMOTE')}, HIVE_HOME {envs['remote'].get('HIVE_HOME', 'unset')}"
    )
    frames = {
        side: json.dumps(
            {
                "agent": envs[side]["HIVE_AGENT_ID"],
                "secret": envs[side]["HIVE_SECRET"],
                "event": json.loads(STOP_EVENT),
            }
        ).encode()
        + b"\n"
        for side in envs
    }
    inbox = office.paths.mailbox("oscar").inbox
    hook_argv = [PYTHON, "-I", "-S", shim.__file__]
    send_argv = [HIVE, "send", "--to", "oscar", "--subject", "ping", "--body", "x"]
    landed: dict[str, list[float]] = {"local": [], "remote": []}

    def hook(side: str) -> float:
        return run_to_exit(hook_argv, envs[side], cwds[side], STOP_EVENT)

    def sock(side: str) -> float:
        return exchange(envs[side]["HIVE_SOCKET"], frames[side])

    person = {k: v for k, v in envs["local"].items() if k not in ("HIVE_AGENT_ID", "HIVE_SECRET")}
    send_envs = {"local": person, "remote": envs["remote"]}

    def send(side: str) -> float:
        before = json_names(inbox)
        took = run_to_exit(send_argv, send_envs[side], cwds[side], None)
        exited = time.perf_counter()
        while json_names(inbox) == before:
            if time.perf_counter() - exited > 10:
                raise SystemExit(f"the {side} desk's message took over 10 s to land")
        landed[side].append(time.perf_counter() - exited)
        return took

    kinds: dict[str, Callable[[str], float]] = {"hook": hook, "sock": sock, "send": send}
    times: dict[str, list[float]] = {f"{k} {s}": [] for k in kinds for s in envs}
    for round_ in range(WARMUP_ROUNDS + runs):
        order = list(times)
        random.shuffle(order)
        for name in order:
            kind, side = name.split()
            took = kinds[kind](side)
            if round_ >= WARMUP_ROUNDS:
                times[name].append(took)
            elif kind == "send":
                landed[side].pop()
    times["landed local"], times["landed remote"] = landed["local"], landed["remote"]

    labels = {
        "hook": "cth-hook, Stop, to its exit",
        "sock": "hook frame on the socket, to its reply",
        "send": "`hive send`, to its exit",
        "landed": "`hive send` exited -> file in the inbox",
    }
    print(f"\n{runs} rounds, each command once a round in a shuffled order")
    print(
        f"  {'what':<40} {'local p50':>9} {'p99':>7} {'remote p50':>10} {'p99':>7}  remote/local p50"
    )
    summary: dict[str, tuple[float, float, float, float, float]] = {}
    for kind, label in labels.items():
        lo, re_ = times[f"{kind} local"], times[f"{kind} remote"]
        row = (
            statistics.median(lo) * 1e3,
            percentile(lo, 0.99) * 1e3,
            statistics.median(re_) * 1e3,
            percentile(re_, 0.99) * 1e3,
            statistics.median(re_) / statistics.median(lo),
        )
        summary[kind] = row
        print(
            f"  {label:<40} {row[0]:9.2f} {row[1]:7.2f} {row[2]:10.2f} {row[3]:7.2f}  {row[4]:.2f}x"
        )

    def side_by_side(kind: str) -> str:
        p50, p99, r50, r99, ratio = summary[kind]
        return (
            f"remote p50 {r50:.1f} ms, p99 {r99:.1f} ms; local p50 {p50:.1f} ms,"
            f" p99 {p99:.1f} ms; remote/local p50 {ratio:.2f}x"
        )

    command = "bench/bench_remote.py latency"
    s = summary["sock"]
    figure(
        f"remote desk (loopback ssh) vs local: hook round trip, `cth-hook` as agents run it,"
        f" Stop event, to its exit, {runs} runs interleaved",
        side_by_side("hook") + f" (the frame alone on the socket: remote p50 {s[2]:.2f} ms,"
        f" local {s[0]:.2f} ms, {s[4]:.1f}x)",
        target="reported (issue 17)",
        command=command,
    )
    landed_ = summary["landed"]
    figure(
        f"remote desk (loopback ssh, the thin `hive` on its forwarded socket) vs local: "
        f"`hive send` to its exit, {runs} runs interleaved",
        side_by_side("send") + f"; then to the file in the inbox: remote p50 {landed_[2]:.2f} ms,"
        f" p99 {landed_[3]:.2f} ms, local p50 {landed_[0]:.2f} ms, p99 {landed_[1]:.2f} ms",
        target=f"remote <= {SEND_TARGET:g}x local (issue 25)",
        ok=summary["send"][4] <= SEND_TARGET,
        command=command,
    )


# --- idle ------------------------------------------------------------------------------


def idle_cpu(office: ServedOffice, seconds: float, host_roots: list[int]) -> dict[str, float]:
    """Percent of one core over `seconds`: the office process, its children by command
    name, and the host side (everything under `host_roots`)."""
    pid = office.process.pid
    time.sleep(3)  # the last starts settle
    office_0, kids_0, host_0 = cpu_of(pid), descendants([pid]), descendants(host_roots)
    t0 = time.monotonic()
    time.sleep(seconds)
    office_1, kids_1, host_1 = cpu_of(pid), descendants([pid]), descendants(host_roots)
    span = time.monotonic() - t0
    out: dict[str, float] = {"office": 100 * (office_1 - office_0) / span}
    by_comm: dict[str, float] = {}
    for p, (comm, cpu) in kids_1.items():
        if p in kids_0:
            by_comm[comm] = by_comm.get(comm, 0.0) + cpu - kids_0[p][1]
    for comm, cpu in by_comm.items():
        out[f"children {comm}"] = 100 * cpu / span
    out["children"] = 100 * sum(by_comm.values()) / span
    out["host side"] = 100 * sum(c - host_0[p][1] for p, (_, c) in host_1.items() if p in host_0)
    out["host side"] /= span
    out["procs"] = float(len(kids_1))
    return out


def bench_idle(desks: int, hosts: int, seconds: float) -> None:
    names = [f"d{n:02d}" for n in range(desks)]
    hosts = max(1, min(hosts, desks))
    root = Path(tempfile.mkdtemp(prefix="hbi-", dir="/tmp"))
    try:
        with ExitStack() as stack:
            sshds = [stack.enter_context(running_sshd(root / f"sshd{n}")) for n in range(hosts)]
            work = root / "work"
            work.mkdir()
            text = roster(
                names[0],
                "".join(remote_desk(a, sshds[i % hosts], work) for i, a in enumerate(names)),
            )
            print(f"office of {desks} remote shell desks over {hosts} sshd ...", file=sys.stderr)
            with office_up(root / "remote", text, names, 60 + 6 * desks) as office:
                remote = idle_cpu(office, seconds, [h.process.pid for h in sshds])
        text = roster(names[0], "".join(local_desk(a) for a in names))
        print(f"office of {desks} local shell desks ...", file=sys.stderr)
        with office_up(root / "local", text, names, 60 + 2 * desks) as office:
            local = idle_cpu(office, seconds, [])
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"\nidle CPU over {seconds:.0f} s, percent of one core ({desks} desks each)")
    print(f"  {'':<36} {'remote desks':>12} {'local desks':>12}")
    rows = ["office", "children", "host side"]
    rows += sorted(k for k in {*remote, *local} if k.startswith("children "))
    for key in [*rows, "procs"]:
        r, lo = remote.get(key), local.get(key)
        cells = [f"{v:12.2f}" if v is not None else f"{'-':>12}" for v in (r, lo)]
        label = {
            "office": "the office process",
            "children": "its child processes, summed",
            "host side": "host side (sshd + remote shells)",
            "procs": "child processes (count)",
            # The office's one python child is desks/session_guard.py.
            "children python": "  children python (session guard)",
        }.get(key, f"  {key}")
        print(f"  {label:<36} {cells[0]} {cells[1]}")
    ssh = remote.get("children ssh", remote["children"])
    figure(
        f"idle CPU of an office of {desks} remote shell desks ({desks} ssh connections over"
        f" {hosts} loopback sshd), {seconds:.0f} s",
        f"the office process {remote['office']:.2f}% of one core, its ssh children summed"
        f" {ssh:.2f}% (host side: sshd + remote shells {remote['host side']:.2f}%); an office"
        f" of {desks} local shell desks: {local['office']:.2f}% (its shells"
        f" {local['children']:.2f}%)",
        target=f"office process < {IDLE_TARGET:g}% of a core",
        ok=remote["office"] < IDLE_TARGET,
        command="bench/bench_remote.py idle",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("which", nargs="?", default="all", choices=["latency", "idle", "all"])
    parser.add_argument("--runs", type=int, default=100, help="interleaved rounds")
    parser.add_argument("--desks", type=int, default=50, help="desks of the idle offices")
    parser.add_argument("--hosts", type=int, default=5, help="sshd instances they spread over")
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument(
        "--quick", action="store_true", help="20 rounds, 10 desks over 2 sshd, 10 s idle"
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.desks, args.hosts, args.idle_seconds = 20, 10, 2, 10
    if sshd_binary() is None:
        raise SystemExit(
            "no sshd here: install openssh-server (./scripts/setup does where it can)."
        )
    if args.which in ("latency", "all"):
        bench_latency(args.runs)
    if args.which in ("idle", "all"):
        bench_idle(args.desks, args.hosts, args.idle_seconds)


if __name__ == "__main__":
    main()
