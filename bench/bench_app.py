"""The app as a person runs it, in a real pty (prints, never asserts).

  first-frame  time from starting `hive-office` to the map being on screen (median of
               runs), beside `python -c "import textual.app"` of the same venv started
               the same way.
  idle         CPU of the app process with 8 idle agents (interactive bash) over 60 s.

Usage: .venv-3.11/bin/python bench/bench_app.py [first-frame|idle|all] [--runs N]
       [--seconds S] [--venv DIR | --checkout]

What users run is a wheel installed in a venv. By default the bench does as bench_cli
does (its `install`): builds a wheel of this working tree, installs it in a fresh venv
in /tmp and runs that venv's `hive-office` and `python`. --venv DIR keeps that venv for
the next run, which only reinstalls the wheel. --checkout runs the venv the bench runs
in instead (the editable checkout, whose import hook slows every interpreter's start,
the reference's too). Each figure says which install it measured.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ptyprocess
from bench_cli import install
from figures import figure

AGENTS = [f"a{n}" for n in range(8)]


@dataclass(frozen=True)
class Install:
    """The venv a bench runs `hive-office` and the reference `python` from."""

    bin: Path
    kind: str  # said in each figure: "a wheel install" or "the editable checkout"


def install_options(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--venv", type=Path, metavar="DIR", help="keep the wheel's venv here (default: a fresh one)"
    )
    which.add_argument(
        "--checkout", action="store_true", help="run this venv's editable checkout instead"
    )


@contextmanager
def installed(opts: argparse.Namespace) -> Iterator[Install]:
    """The install `--venv` / `--checkout` chose, for the bench's duration."""
    if opts.checkout:
        yield Install(Path(sys.executable).parent, "the editable checkout")
        return
    with tempfile.TemporaryDirectory(prefix="hb-app-", dir="/tmp") as scratch:
        venv = opts.venv or Path(scratch) / "venv"
        yield Install(install(venv, fresh=opts.venv is None), "a wheel install")


def make_home(root: Path, bin_dir: Path) -> Path:
    home = root / "home"
    home.mkdir()
    roster = '[office]\nmanager = "a0"\n' + "".join(
        f'\n[[agents]]\nid = "{a}"\nname = "Agent {a}"\nprovider = "shell"\ncwd = "{root}"\n'
        f'command = ["bash", "--norc", "--noprofile", "-i"]\n'
        for a in AGENTS
    )
    (home / "office.toml").write_text(roster)
    os.system(f"{bin_dir / 'hive-office'} init --home {home} > /dev/null")
    return home


def spawn(argv: list[str]) -> ptyprocess.PtyProcess:
    # A person's Python keeps its compiled modules (pip writes them, an editable install
    # on first run); a sandbox's PYTHONDONTWRITEBYTECODE would have every launch compile
    # the app's sources again, a cost no person pays.
    skip = ("HIVE_", "TMUX", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["TERM"] = "xterm-256color"
    return ptyprocess.PtyProcess.spawn(argv, env=env, dimensions=(48, 160))


def read_until(proc: ptyprocess.PtyProcess, needle: bytes, timeout: float) -> float:
    start = time.perf_counter()
    seen = b""
    while needle not in seen:
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"no {needle!r} within {timeout} s")
        try:
            seen = seen[-4096:] + proc.read(65536)
        except EOFError:
            raise SystemExit("the app exited") from None
    return time.perf_counter() - start


def quit_app(proc: ptyprocess.PtyProcess) -> None:
    proc.write(b"\x1d")
    time.sleep(0.2)
    proc.write(b"q")
    # The app is a client of an office in the background (issue 11): q asks, s stops it.
    time.sleep(0.2)
    proc.write(b"s")
    deadline = time.monotonic() + 30
    while proc.isalive() and time.monotonic() < deadline:
        if select.select([proc.fd], [], [], 0.2)[0]:
            try:
                proc.read(65536)
            except EOFError:
                break
    proc.terminate(force=True)


def textual_import_s(bin_dir: Path) -> float:
    """The floor for any Textual app: the venv's own Python importing it, in a pty."""
    ref = spawn([str(bin_dir / "python"), "-c", "import textual.app; print('imported')"])
    try:
        return read_until(ref, b"imported", 30)
    finally:
        ref.terminate(force=True)


def load() -> str:
    return f"1-min load {os.getloadavg()[0]:.1f}"


def bench_first_frame(runs: int, inst: Install) -> None:
    app_s: list[float] = []
    ref_s: list[float] = []
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        home = make_home(Path(d), inst.bin)
        for _ in range(runs):
            ref_s.append(textual_import_s(inst.bin))
            proc = spawn([str(inst.bin / "hive-office"), "--home", str(home)])
            app_s.append(read_until(proc, b"Manager", 30))
            quit_app(proc)
    app, ref = statistics.median(app_s), statistics.median(ref_s)
    print(
        f"first frame: {inst.bin / 'hive-office'} ({inst.kind}) -> map on screen, {runs} runs: "
        f"median {app * 1000:.0f} ms, max {max(app_s) * 1000:.0f} ms (target <= 1500 ms); "
        f"that venv's `python -c 'import textual.app'` alone: {ref * 1000:.0f} ms "
        f"({app / ref:.1f}x); {load()}"
    )
    figure(
        f"time to first frame, {len(AGENTS)} shell agents, {inst.kind}",
        f"median {app * 1000:,.0f} ms over {runs} runs (max {max(app_s) * 1000:,.0f} ms); "
        f"the same venv's `import textual.app` alone {ref * 1000:.0f} ms ({app / ref:.1f}x); "
        f"{load()}",
        target="<= 1,500 ms",
        ok=app <= 1.5,
        command="bench/bench_app.py first-frame",
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_idle(seconds: float, inst: Install) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        home = make_home(Path(d), inst.bin)
        proc = spawn([str(inst.bin / "hive-office"), "--home", str(home)])
        read_until(proc, b"Manager", 30)
        time.sleep(5)  # agents started, prompts drawn
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        end = t0 + seconds
        while (left := end - time.monotonic()) > 0:  # keep the pty drained, as a terminal would
            ready, _, _ = select.select([proc.fd], [], [], left)
            if ready:
                try:
                    proc.read(65536)
                except EOFError:
                    break
        c1, t1 = cpu_seconds(proc.pid), time.monotonic()
        quit_app(proc)
    print(
        f"idle: the app with {len(AGENTS)} idle agents used {100 * (c1 - c0) / (t1 - t0):.2f}% of one core "
        f"over {t1 - t0:.0f} s (target <= 2%)"
    )
    pct = 100 * (c1 - c0) / (t1 - t0)
    figure(
        f"idle CPU of the app, {len(AGENTS)} idle agents, {t1 - t0:.0f} s, {inst.kind}",
        f"{pct:.2f}% of one core",
        target="<= 2% of a core",
        ok=pct <= 2,
        command="bench/bench_app.py idle",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("which", nargs="?", default="all", choices=["first-frame", "idle", "all"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60)
    install_options(parser)
    args = parser.parse_args()
    with installed(args) as inst:
        if args.which in ("first-frame", "all"):
            bench_first_frame(args.runs, inst)
        if args.which in ("idle", "all"):
            bench_idle(args.seconds, inst)


if __name__ == "__main__":
    main()
