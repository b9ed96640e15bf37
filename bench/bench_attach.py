"""The app as a client of an office that runs on its own (issue 11), against the app
with the office in its own process and against tmux (prints, never asserts).

first-frame: an office of 8 busy shell agents (each printing ~500 lines a second) runs
  under `hive-office serve`; the client (SocketLink, HiveApp headless under Pilot,
  160x48) is timed from connecting until the frame after every pane got its snapshot.
  The reference is the in-process app (HiveApp(Office) on a copy of that office) from
  building the Office until its first frame. Both in this process, Textual already
  imported; runs alternate.
keys, cat: in one tmux server, a client app attached to a `serve` office, an
  in-process app on an office of its own (both of tests/tmux_support.py's bash agents,
  zoomed) and a plain tmux pane sized to their pane's interior. Keystroke to echo is
  measured as bench/bench_keys_latency.py does (tmux send-keys, the echo read through
  pipe-pane), keys alternating between the three; `cat` of a file as
  bench/bench_throughput.py does (the wall time the shell measured), runs alternating.

Usage: .venv/bin/python bench/bench_attach.py [first-frame|keys|cat|all] [--runs N]
       [--keys N] [--mb SIZE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import statistics
import string
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from bench_keys_latency import Output, percentile
from bench_throughput import make_file, timed_cat
from figures import figure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from hive_core.cli import hive  # noqa: E402
from hive_core.config import load_office  # noqa: E402
from hive_core.hive import init_office  # noqa: E402
from hive_core.office import Office, office_lock  # noqa: E402
from hive_core.paths import HivePaths  # noqa: E402
from hive_tui.app import HiveApp  # noqa: E402
from hive_tui.link import SocketLink  # noqa: E402
from tests.tmux_support import (  # noqa: E402
    AGENTS,
    BIN,
    CHILD_TERM,
    PREFIX_KEY,
    PS1,
    SHELL,
    Box,
    Grid,
    Tmux,
    crop,
    find_box,
    row_text,
    tmux_env,
    wait_for,
    write_office,
)

BUSY = 8
SIZE = (160, 48)
PREFIX = "ctrl+right_square_bracket"
# Zoomed, a 162x50 terminal gives a 160x47 pane (bench/bench_throughput.py's size).
SCREEN = (162, 50)
# 51 numbered lines, then a tenth of a second: ~500 lines a second per agent.
BUSY_COMMAND = "i=0; while :; do seq $i $((i+50)); i=$((i+51)); sleep 0.1; done"


# --- first frame ---------------------------------------------------------------------------


def busy_home(root: Path) -> HivePaths:
    paths = HivePaths(root)
    paths.home.mkdir(parents=True)
    agents = "".join(
        f'\n[[agents]]\nid = "b{n}"\nname = "Busy{n}"\nprovider = "shell"\ncwd = "{root}"\n'
        f"command = ['sh', '-c', '{BUSY_COMMAND}']\n"
        for n in range(BUSY)
    )
    paths.office_toml.write_text('[office]\nmanager = "b0"\n' + agents)
    init_office(paths)
    return paths


async def _after_frame(app: HiveApp) -> None:
    painted = asyncio.get_running_loop().create_future()
    app.call_after_refresh(painted.set_result, None)
    await painted


async def client_first_frame(paths: HivePaths) -> float:
    start = time.perf_counter()
    app = HiveApp(SocketLink.connect(paths))
    restored: set[str] = set()
    pane_snapshot = app.pane_snapshot

    def counted(agent_id: str, data: bytes) -> None:
        pane_snapshot(agent_id, data)
        restored.add(agent_id)

    app.pane_snapshot = counted  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        while len(restored) < len(app.roster):
            await pilot.pause(0.001)
        await _after_frame(app)
        took = time.perf_counter() - start
        await pilot.press(PREFIX, "d")
    return took


async def inproc_first_frame(paths: HivePaths) -> float:
    start = time.perf_counter()
    app = HiveApp(Office(paths, load_office(paths.office_toml), program=hive))
    async with app.run_test(size=SIZE) as pilot:
        await _after_frame(app)
        took = time.perf_counter() - start
        await pilot.press(PREFIX, "q")
    return took


def first_frame(root: Path, runs: int) -> None:
    served = busy_home(root / "served")
    local = busy_home(root / "local")
    log = (root / "serve.out").open("w")
    serve = subprocess.Popen(
        [str(BIN / "hive-office"), "serve", "--home", str(served.home)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    times: dict[str, list[float]] = {"client": [], "inproc": []}
    try:
        wait_for(served.client_socket.exists, "the client socket", 60)
        # 500 lines a second for 20 s: a full scrollback (10,000 lines) in every pane to send.
        time.sleep(20)
        for run in range(runs):
            order = ("client", "inproc") if run % 2 == 0 else ("inproc", "client")
            for mode in order:
                with office_lock(local) if mode == "inproc" else contextlib.nullcontext():
                    measure = (
                        client_first_frame(served)
                        if mode == "client"
                        else inproc_first_frame(local)
                    )
                    times[mode].append(asyncio.run(measure))
            print(
                f"run {run + 1}: client {times['client'][-1] * 1000:.0f} ms, "
                f"in-process {times['inproc'][-1] * 1000:.0f} ms",
                file=sys.stderr,
            )
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
    client = statistics.median(times["client"]) * 1000
    inproc = statistics.median(times["inproc"]) * 1000
    print(
        f"first frame, {BUSY} busy panes, {SIZE[0]}x{SIZE[1]}, {runs} runs each: attaching "
        f"client {client:.0f} ms (connect to the frame with every snapshot), in-process app "
        f"{inproc:.0f} ms (Office built to its first frame)"
    )
    figure(
        f"attach to an office of {BUSY} busy panes: a complete first frame, client vs the "
        f"in-process app, {runs} runs each",
        f"client {client:.0f} ms, in-process {inproc:.0f} ms ({client - inproc:+.0f} ms)",
        target="<= +300 ms over the in-process app",
        ok=client - inproc <= 300,
        command="bench/bench_attach.py first-frame",
    )


# --- keys and cat, in tmux -----------------------------------------------------------------

CLIENT = "import sys; from hive_core.paths import HivePaths; from hive_tui.client import run_client; from pathlib import Path; sys.exit(run_client(HivePaths(Path(sys.argv[1]))))"
INPROC = (
    "import sys; from hive_core.paths import HivePaths; from hive_core.config import load_office; "
    "from hive_core.office import Office, office_lock; from hive_tui.app import HiveApp; "
    "from pathlib import Path; p = HivePaths(Path(sys.argv[1])); lock = office_lock(p); lock.__enter__(); "
    "HiveApp(Office(p, load_office(p.office_toml))).run()"
)
APPS = ("client", "inproc")


class Three:
    """A client app, an in-process app and a plain pane in one tmux server."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = tmux_env(root)
        self.tmux = Tmux(root, self.env)
        (root / "c").mkdir()
        (root / "i").mkdir()
        served = write_office(root / "c")
        local = write_office(root / "i")
        self.log = (root / "serve.out").open("w")
        self.serve = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(served)],
            env=self.env,
            cwd=root,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for((served / "run" / "client.sock").exists, "the client socket", 60)
        python = sys.executable
        for name, script, home in (("client", CLIENT, served), ("inproc", INPROC, local)):
            command = shlex.join([python, "-c", script, str(home)])
            self.tmux(
                "new-session", "-d", "-s", name, "-x", str(SCREEN[0]), "-y", str(SCREEN[1]),
                "-c", str(root), command,
            )  # fmt: skip
        for name in APPS:
            wait_for(partial(self.box, name), f"the {name} app's pane", 60)
            self.tmux("send-keys", "-t", name, PREFIX_KEY, "z")
        boxes = {n: wait_for(partial(self._settled, n), f"{n} zoomed", 30) for n in APPS}
        assert boxes["client"] == boxes["inproc"], boxes
        self.boxes = boxes
        box = boxes["client"]
        terminal = [f"{k}={v}" for k, v in CHILD_TERM.items()]
        ref = ["env", "-u", "TMUX", "-u", "TMUX_PANE", *terminal, f"PS1={PS1}", *SHELL]
        self.tmux(
            "new-session", "-d", "-s", "ref", "-x", str(box.cols), "-y", str(box.rows),
            "-c", str(root), shlex.join(ref),
        )  # fmt: skip

        def prompted(name: str) -> bool:
            return any(row_text(r).startswith("$") for r in self.screen(name))

        for name in (*APPS, "ref"):
            wait_for(partial(prompted, name), f"a prompt in {name}", 30)

    def box(self, name: str) -> Box | None:
        return find_box(self.tmux.capture(name), f"1 {AGENTS[0][1]}")

    def _settled(self, name: str) -> Box | None:
        first = self.box(name)
        time.sleep(0.2)
        second = self.box(name)
        return second if first == second and second is not None and second.cols > 100 else None

    def screen(self, name: str) -> Grid:
        if name == "ref":
            return self.tmux.capture("ref")
        box = self.boxes[name]
        return crop(self.tmux.capture(name), box.top, box.left, box.rows, box.cols)

    def _ended(self, name: str) -> bool:
        return self.tmux("display", "-p", "-t", name, "#{pane_dead}").strip() == "1"

    def close(self) -> None:
        self.tmux("send-keys", "-t", "client", PREFIX_KEY, "d")
        self.tmux("send-keys", "-t", "inproc", PREFIX_KEY, "q")
        self.serve.send_signal(signal.SIGTERM)
        self.serve.wait(timeout=120)
        for name in APPS:
            with contextlib.suppress(AssertionError):
                wait_for(partial(self._ended, name), f"the {name} app to end", 30)
        self.tmux.kill()


def keys(three: Three, count: int) -> None:
    targets = (*APPS, "ref")
    outputs = {t: Output(three, t, three.root / f"{t}.fifo") for t in targets}  # type: ignore[arg-type]
    latency: dict[str, list[float]] = {t: [] for t in targets}
    for n in range(count):
        char = string.ascii_lowercase[n % 26]
        order = targets[n % 3 :] + targets[: n % 3]
        for target in order:
            output = outputs[target]
            output.drain()
            start = time.perf_counter()
            three.tmux.type(target, char, enter=False)
            latency[target].append(output.wait_for(char.encode(), start))
        if n % 40 == 39:
            for target in targets:
                three.tmux.keys(target, "C-u")
    for target in targets:
        three.tmux("pipe-pane", "-t", target)
    ms = {t: [v * 1000 for v in values] for t, values in latency.items()}
    p50 = {t: statistics.median(v) for t, v in ms.items()}
    p99 = {t: percentile(v, 0.99) for t, v in ms.items()}
    print(
        f"keystroke to echo, {count} keys each, rotating: client p50 {p50['client']:.1f} ms "
        f"p99 {p99['client']:.1f} ms; in-process app p50 {p50['inproc']:.1f} ms p99 "
        f"{p99['inproc']:.1f} ms; tmux p50 {p50['ref']:.1f} ms p99 {p99['ref']:.1f} ms"
    )
    figure(
        f"keystroke to echo through the client, {count} keys, rotating with the in-process "
        "app and a plain tmux pane (each includes `tmux send-keys` starting)",
        f"client p50 {p50['client']:.1f} ms, p99 {p99['client']:.1f} ms; in-process "
        f"p50 {p50['inproc']:.1f} ms, p99 {p99['inproc']:.1f} ms; tmux p50 "
        f"{p50['ref']:.1f} ms, p99 {p99['ref']:.1f} ms "
        f"(client {p50['client'] - p50['ref']:+.1f} ms at p50)",
        target="within 5 ms of tmux at p50",
        ok=p50["client"] - p50["ref"] <= 5,
        command="bench/bench_attach.py keys",
    )


def cat(three: Three, runs: int, mb: float) -> None:
    data = three.root / "output.txt"
    make_file(data, int(mb * 1e6))
    megabytes = data.stat().st_size / 1e6
    targets = (*APPS, "ref")
    times: dict[str, list[float]] = {t: [] for t in targets}
    for run in range(runs):
        order = targets[run % 3 :] + targets[: run % 3]
        for target in order:
            times[target].append(timed_cat(three, target, data, three.root / "took"))  # type: ignore[arg-type]
            time.sleep(0.5)
        print(
            f"run {run + 1}: " + ", ".join(f"{t} {times[t][-1]:.2f} s" for t in targets),
            file=sys.stderr,
        )
    med = {t: statistics.median(v) for t, v in times.items()}
    box = three.boxes["client"]
    print(
        f"cat {megabytes:.1f} MB in a {box.cols}x{box.rows} pane, {runs} runs each: client "
        f"{med['client']:.2f} s, in-process {med['inproc']:.2f} s, tmux {med['ref']:.2f} s"
    )
    ratio = med["client"] / med["ref"]
    figure(
        f"`cat` of a {megabytes:.0f} MB file through the client vs the in-process app vs "
        f"a plain tmux pane, {box.cols}x{box.rows}, {runs} runs each, rotating",
        f"client {med['client']:.2f} s ({ratio:.2f}x tmux), in-process "
        f"{med['inproc']:.2f} s ({med['inproc'] / med['ref']:.2f}x), tmux {med['ref']:.2f} s",
        target="<= 1.0x tmux",
        ok=ratio <= 1.0,
        command="bench/bench_attach.py cat",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "what", nargs="?", default="all", choices=("first-frame", "keys", "cat", "all")
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--mb", type=float, default=50)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hive-att-", dir="/tmp"))
    try:
        if args.what in ("first-frame", "all"):
            first_frame(root / "ff", args.runs)
        if args.what in ("keys", "cat", "all"):
            if shutil.which("tmux") is None:
                raise SystemExit("tmux is not installed (scripts/setup installs it)")
            (root / "t").mkdir()
            three = Three(root / "t")
            try:
                if args.what in ("keys", "all"):
                    keys(three, args.keys)
                if args.what in ("cat", "all"):
                    cat(three, args.runs, args.mb)
            finally:
                three.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("TMUX", None)
    main()
