"""Terminal pane benchmarks (prints, never asserts).

record   run the real claude CLI in a pty against the scripted model for a few turns with
         tool calls and keep the raw bytes it wrote: tests/fixtures/claude_session.bin
         (+ .json with the size it ran at)
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import avt
import pexpect
import pyghostty
import pyte
from textual.app import App, ComposeResult
from textual.containers import Grid

from hive_core.demo.claude_env import claude_environment, write_claude_config
from hive_core.demo.scripted_model import (
    Scenario,
    ScriptedModel,
    ToolUse,
    bash,
    has_tool_result,
    turn,
    user_says,
)
from hive_core.terminal.emulator import GhosttyEmulator
from hive_tui.terminal.pane import TerminalPane

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "claude_session.bin"
FIXTURE_META = FIXTURE.with_suffix(".json")
BIN = Path(sys.executable).parent
API_KEY = "sk-ant-scripted-0123456789abcdefghijklmnop"
RECORD_ROWS, RECORD_COLS = 40, 120
# The model "thinks" this long on some turns, so the spinner and its timer redraw as live.
THINK_S = 2.0

# Markdown, CJK, emoji and a code block: the renderings a pane has to get right.
PLAN = """## Plan for the parser fix

1. **Read** the failing test and the tokenizer
2. Run the suite to see the damage — `pytest -q tests/test_tokens.py`
3. Patch `split_words()` so wide text (日本語のテキスト, 한국어) and emoji 🚀✨ keep their width

> The tokenizer treats combining marks (e\u0301) as separate words.
"""
PATCH = """Found it. The loop indexed bytes instead of code points:

```python
def split_words(text: str) -> list[str]:
    return [word for word in text.split() if word]
```

| file | change |
| --- | --- |
| tokens.py | split on code points |
| test_tokens.py | new cases for 中文 and 👩\u200d💻 |
"""
DONE = "All 12 tests pass ✅. The fix is in `tokens.py`; summary written to NOTES.md."


def _scenario() -> Scenario:
    listing = "printf '\\033[1;32mok\\033[0m  \\033[38;5;208mwarn\\033[0m\\n'; ls -la; seq 1 40"
    return Scenario(
        [
            turn(
                user_says("fix the tokenizer"),
                PLAN,
                bash(listing, "List the project"),
                delay=THINK_S,
            ),
            turn(
                has_tool_result(),
                PATCH,
                ToolUse(
                    "Write",
                    {
                        "file_path": "tokens.py",
                        "content": "def split_words(text):\n    return text.split()\n",
                    },
                ),
            ),
            turn(
                has_tool_result(),
                "Running the tests.",
                bash("seq 1 200 | paste - - - -"),
                delay=THINK_S,
            ),
            turn(has_tool_result(), DONE),
        ]
    )


def record(settle_s: float = 3.0) -> None:
    claude = shutil.which("claude", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if claude is None:
        sys.exit("claude is not installed: npm install -g @anthropic-ai/claude-code")
    root = Path(tempfile.mkdtemp(prefix="hive-rec-", dir="/tmp"))
    project = root / "project"
    project.mkdir()
    config_dir = root / "claude-home"
    write_claude_config(config_dir, API_KEY, trusted=[project])
    settings = root / "settings.json"
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash", "Write", "Read"]}}))
    scenario = _scenario()
    captured = bytearray()

    def pump(until: float) -> None:
        while time.monotonic() < until:
            try:
                captured.extend(child.read_nonblocking(65536, timeout=0.1))
            except pexpect.TIMEOUT:
                continue

    def pump_until_quiet(quiet_s: float, limit_s: float = 60) -> None:
        deadline = time.monotonic() + limit_s
        last = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < quiet_s:
            try:
                captured.extend(child.read_nonblocking(65536, timeout=0.1))
                last = time.monotonic()
            except pexpect.TIMEOUT:
                continue

    with ScriptedModel(scenario) as model:
        env = claude_environment(base_url=model.base_url, api_key=API_KEY, config_dir=config_dir)
        env["TERM"] = "xterm-256color"
        env.pop("TMUX", None)
        child = pexpect.spawn(
            claude,
            ["--settings", str(settings)],
            cwd=str(project),
            env=env,
            dimensions=(RECORD_ROWS, RECORD_COLS),
        )
        try:
            pump_until_quiet(settle_s)
            # Typed as a person would: text, then Enter apart.
            child.send("fix the tokenizer please")
            pump(time.monotonic() + 0.5)
            child.send("\r")
            deadline = time.monotonic() + 120
            while not scenario.done and time.monotonic() < deadline:
                pump(time.monotonic() + 0.2)
            pump_until_quiet(settle_s)
            child.send("/exit")
            pump(time.monotonic() + 0.5)
            child.send("\r")
            pump_until_quiet(settle_s, limit_s=20)
        except pexpect.EOF:
            pass
        finally:
            child.terminate(force=True)
    shutil.rmtree(root, ignore_errors=True)
    if not scenario.done:
        sys.exit(f"the session stopped after {scenario.played} of {len(scenario.turns)} turns")
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_bytes(bytes(captured))
    FIXTURE_META.write_text(
        json.dumps({"rows": RECORD_ROWS, "cols": RECORD_COLS, "term": "xterm-256color"}) + "\n"
    )
    print(f"recorded {len(captured):,} bytes to {FIXTURE.relative_to(ROOT)}")


# --- the candidates, each behind the few calls the checks need -------------------------


class Candidate:
    """One emulator library: feed bytes, read a row's text, and what it exposes of modes."""

    name = ""

    def __init__(self, rows: int, cols: int) -> None:
        raise NotImplementedError

    def feed(self, data: bytes) -> None:
        raise NotImplementedError

    def text(self, row: int) -> str:
        raise NotImplementedError

    def fg(self, col: int, row: int) -> str:
        """The cell's foreground as the library reports it."""
        raise NotImplementedError

    def mode(self, number: int) -> bool | None:
        """A DEC private mode, or None when the library does not expose it."""
        raise NotImplementedError

    def cursor(self) -> tuple[int, int, bool]:
        raise NotImplementedError

    def title(self) -> str | None:
        raise NotImplementedError

    def history(self) -> int | None:
        raise NotImplementedError

    def resize(self, rows: int, cols: int) -> tuple[int, int]:
        raise NotImplementedError


class Pyte(Candidate):
    name = "pyte 0.8.2"

    def __init__(self, rows: int, cols: int) -> None:
        self.screen = pyte.HistoryScreen(cols, rows, history=1000)
        self.stream = pyte.ByteStream(self.screen)

    def feed(self, data: bytes) -> None:
        self.stream.feed(data)

    def text(self, row: int) -> str:
        return self.screen.display[row]

    def fg(self, col: int, row: int) -> str:
        return str(self.screen.buffer[row][col].fg)

    def mode(self, number: int) -> bool | None:
        # pyte keeps private modes shifted left by 5.
        return (number << 5) in self.screen.mode

    def cursor(self) -> tuple[int, int, bool]:
        c = self.screen.cursor
        return c.y, c.x, not c.hidden

    def title(self) -> str | None:
        return self.screen.title

    def history(self) -> int | None:
        return len(self.screen.history.top)

    def resize(self, rows: int, cols: int) -> tuple[int, int]:
        self.screen.resize(rows, cols)
        return self.screen.lines, self.screen.columns


class PyAvt(Candidate):
    name = "pyavt 0.1.2"

    def __init__(self, rows: int, cols: int) -> None:
        self.vt = avt.Vt(cols, rows, 1000)
        self.rows = rows
        # avt takes str: decoding is part of its cost.
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> None:
        self.vt.feed_str(self.decoder.decode(data))

    def text(self, row: int) -> str:
        return self.vt.view()[row].text

    def fg(self, col: int, row: int) -> str:
        return str(self.vt.view()[row][col].pen.foreground)

    def mode(self, number: int) -> bool | None:
        return self.vt.cursor_key_app_mode if number == 1 else None

    def cursor(self) -> tuple[int, int, bool]:
        c = self.vt.cursor
        return c.row, c.col, c.visible

    def title(self) -> str | None:
        return None

    def history(self) -> int | None:
        return len(self.vt.lines()) - self.rows

    def resize(self, rows: int, cols: int) -> tuple[int, int]:
        self.vt.resize(cols, rows)
        self.rows = rows
        cols, rows = self.vt.size
        return rows, cols


class Ghostty(Candidate):
    name = f"pyghostty {pyghostty.__version__} (libghostty-vt)"

    def __init__(self, rows: int, cols: int) -> None:
        self.emu = GhosttyEmulator(rows, cols, scrollback=1000)

    def feed(self, data: bytes) -> None:
        self.emu.feed(data)

    def text(self, row: int) -> str:
        return "".join(run.text for run in self.emu.line(row))

    def fg(self, col: int, row: int) -> str:
        cells = [(ch, run.attrs.fg) for run in self.emu.line(row) for ch in run.text]
        return str(cells[col][1])

    def mode(self, number: int) -> bool | None:
        return self.emu._mode_on(number)

    def cursor(self) -> tuple[int, int, bool]:
        row, col, visible, _shape = self.emu.cursor
        return row, col, visible

    def title(self) -> str | None:
        return self.emu.title

    def history(self) -> int | None:
        return self.emu.history_size

    def resize(self, rows: int, cols: int) -> tuple[int, int]:
        self.emu.resize(rows, cols)
        return self.emu.size


CANDIDATES: list[type[Candidate]] = [Pyte, PyAvt, Ghostty]


def _fresh(kind: type[Candidate], data: str | bytes, rows: int = 5, cols: int = 20) -> Candidate:
    c = kind(rows, cols)
    c.feed(data.encode() if isinstance(data, str) else data)
    return c


Check = Callable[[type[Candidate]], bool | None]


def _mode_check(setup: bytes, number: int) -> Check:
    def check(kind: type[Candidate]) -> bool | None:
        c = _fresh(kind, setup)
        on = c.mode(number)
        c.feed(setup.replace(b"h", b"l"))
        off = c.mode(number)
        return None if on is None else (on and not off)

    return check


def _alt_screen(kind: type[Candidate]) -> bool:
    c = _fresh(kind, "main\x1b[?1049h\x1b[Halt")
    during = c.text(0).startswith("alt")
    c.feed(b"\x1b[?1049l")
    return during and c.text(0).startswith("main")


def _scroll_region(kind: type[Candidate]) -> bool:
    c = _fresh(kind, "top\r\n2\r\n3\r\n4\r\nbottom\x1b[2;4r\x1b[4;1H\nnew")
    return [c.text(r).rstrip() for r in range(5)] == ["top", "3", "4", "new", "bottom"]


def _resize(kind: type[Candidate]) -> bool:
    c = _fresh(kind, "hello")
    return c.resize(10, 40) == (10, 40) and c.text(0).startswith("hello")


def _title(kind: type[Candidate]) -> bool | None:
    title = _fresh(kind, "\x1b]0;hi\x07").title()
    return None if title is None else title == "hi"


CHECKS: dict[str, Check] = {
    "256-colour SGR": lambda k: _fresh(k, "\x1b[38;5;208mA").fg(0, 0) not in ("default", "None"),
    "truecolor SGR": lambda k: "1" in _fresh(k, "\x1b[38;2;1;2;3mA").fg(0, 0),
    # A wide character's second cell may read as a space; a renderer skips it.
    "wide CJK + emoji": lambda k: (
        _fresh(k, "中文🚀x").text(0).replace(" ", "").startswith("中文🚀x")
    ),
    "wide cursor advance": lambda k: _fresh(k, "中文🚀x").cursor()[1] == 7,
    "combining mark": lambda k: (
        _fresh(k, "e\u0301x").text(0).startswith("e\u0301x")
        and _fresh(k, "e\u0301x").cursor()[1] == 2
    ),
    "text after ZWJ": lambda k: "done" in _fresh(k, "👩\u200d💻 done").text(0),
    "alt screen 1049": _alt_screen,
    "DECSTBM region": _scroll_region,
    "DCS swallowed": lambda k: _fresh(k, "a\x1bP1$r0m\x1b\\b").text(0).rstrip() == "ab",
    "bracketed paste 2004": _mode_check(b"\x1b[?2004h", 2004),
    "mouse 1000": _mode_check(b"\x1b[?1000h", 1000),
    "mouse 1002": _mode_check(b"\x1b[?1002h", 1002),
    "mouse 1003": _mode_check(b"\x1b[?1003h", 1003),
    "mouse SGR 1006": _mode_check(b"\x1b[?1006h", 1006),
    "DECCKM (mode 1)": _mode_check(b"\x1b[?1h", 1),
    "cursor position": lambda k: _fresh(k, "\x1b[3;5H").cursor()[:2] == (2, 4),
    "cursor hidden (25)": lambda k: _fresh(k, "\x1b[?25l").cursor()[2] is False,
    "resize": _resize,
    "scrollback": lambda k: (
        _fresh(k, "".join(f"{n}\r\n" for n in range(10)), rows=3).history() == 8
    ),
    "OSC title": _title,
}


def correct() -> None:
    print(f"{'case':<22}" + "".join(f"{k.name.split(' ')[0]:>12}" for k in CANDIDATES))
    for case, check in CHECKS.items():
        marks = []
        for kind in CANDIDATES:
            try:
                marks.append({True: "ok", False: "WRONG", None: "n/a"}[check(kind)])
            except Exception as exc:
                marks.append(f"crash:{type(exc).__name__}"[:11])
        print(f"{case:<22}" + "".join(f"{m:>12}" for m in marks))


# --- throughput -------------------------------------------------------------------------


def recording(target: int) -> bytes:
    session = FIXTURE.read_bytes()
    return session * max(1, target // len(session))


def synthetic(target: int) -> bytes:
    """What stresses an emulator beyond Claude Code's own output."""
    lines = []
    for n in range(200):
        lines.append(
            f"\x1b[38;5;{n % 256}m{n:04d}\x1b[48;2;{n % 256};{(n * 7) % 256};{(n * 13) % 256}m"
            f" truecolor \x1b[0m 中文テキスト 🚀✨👩\u200d💻 e\u0301a\u0308o\u0302 "
            f"\x1b[1;3;4mstyled\x1b[0m\r\n"
        )
        if n % 50 == 0:
            lines.append(
                "\x1b[?1049h\x1b[H\x1b[2Jfull screen\x1b[5;20r\x1b[20;1H\n\n\x1b[r\x1b[?1049l"
            )
        if n % 20 == 0:
            lines.append("\x1b[3;30r\x1b[30;1H" + "scroll\r\n" * 5 + "\x1b[r")
    block = "".join(lines).encode()
    return block * max(1, target // len(block))


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _median_mbps(kind: type[Candidate], data: bytes, runs: int) -> float:
    chunks = _chunks(data, 4096)
    rates = []
    for _ in range(runs):
        c = kind(RECORD_ROWS, RECORD_COLS)
        start = time.perf_counter()
        for chunk in chunks:
            c.feed(chunk)
        rates.append(len(data) / (time.perf_counter() - start) / 1e6)
    return statistics.median(rates)


def parse(runs: int) -> None:
    # pyte is ~100x slower: a smaller input gives the same rate in reasonable time.
    sizes: dict[type[Candidate], int] = {Pyte: 1_000_000}
    inputs = {"recording": recording, "synthetic": synthetic}
    print(f"parse only, 4 KB chunks, {RECORD_COLS}x{RECORD_ROWS}, median of {runs} runs (MB/s)")
    print(f"{'candidate':<40}" + "".join(f"{name:>12}" for name in inputs))
    rates: dict[str, list[float]] = {}
    for kind in CANDIDATES:
        size = sizes.get(kind, 20_000_000)
        rates[kind.name] = [_median_mbps(kind, make(size), runs) for make in inputs.values()]
        print(f"{kind.name:<40}" + "".join(f"{r:>12.1f}" for r in rates[kind.name]))
    ghostty = rates[Ghostty.name]
    for kind in (Pyte, PyAvt):
        ratio = " ".join(f"{g / r:.1f}x" for g, r in zip(ghostty, rates[kind.name], strict=True))
        print(f"ghostty vs {kind.name}: {ratio}")


class PanesApp(App[None]):
    CSS = "Grid { grid-size: 2 2; }"

    def __init__(self, panes: int) -> None:
        super().__init__()
        self.count = panes

    def compose(self) -> ComposeResult:
        if self.count == 1:
            yield TerminalPane("a0", RECORD_ROWS, RECORD_COLS)
        else:
            with Grid():
                for n in range(self.count):
                    yield TerminalPane(f"a{n}")


async def _render(size: int) -> None:
    data = recording(size)
    app = PanesApp(1)
    async with app.run_test(size=(RECORD_COLS, RECORD_ROWS)) as pilot:
        pane = app.query_one(TerminalPane)
        await pilot.pause(0.1)
        built = pane.strips_built
        start = time.perf_counter()
        for offset in range(0, len(data), 65536):
            pane.feed(data[offset : offset + 65536])
            # Yield as a pty reader does between reads, so frames get painted.
            await asyncio.sleep(0)
        await pilot.pause(0.05)
        elapsed = time.perf_counter() - start
        strips = pane.strips_built - built
        # The worst frame: every row changed (a scroll), rebuilt from the emulator.
        repaints = []
        for _ in range(20):
            pane.feed(b"\r\n")
            pane.emulator.take_dirty()
            pane._strips.clear()
            t0 = time.perf_counter()
            for y in range(RECORD_ROWS):
                pane.render_line(y)
            repaints.append(time.perf_counter() - t0)
    rate = len(data) / elapsed / 1e6
    print(
        f"parse+render, 1 pane 120x40, 64 KB chunks: {rate:.1f} MB/s "
        f"({len(data) / 1e6:.1f} MB in {elapsed:.2f} s, {strips} rows rendered); "
        f"target >= 20 MB/s: {rate / 20:.1f}x; a full 120x40 repaint from the emulator "
        f"takes {statistics.median(repaints) * 1e3:.2f} ms (median of 20)"
    )


async def _stall(seconds: float) -> None:
    app = PanesApp(4)
    data = recording(4_000_000)
    async with app.run_test(size=(RECORD_COLS, RECORD_ROWS)) as pilot:
        panes = list(app.query(TerminalPane))
        await pilot.pause(0.1)
        size = panes[0].size
        delays: list[float] = []
        loop = asyncio.get_running_loop()
        fed = 0

        async def stream(pane: TerminalPane) -> None:
            nonlocal fed
            while True:
                # Sliced as it goes: a list of every chunk up front would itself stall.
                for start in range(0, len(data), 4096):
                    pane.feed(data[start : start + 4096])
                    fed += 4096
                    await asyncio.sleep(0)

        tasks = [asyncio.create_task(stream(pane)) for pane in panes]
        end = loop.time() + seconds
        while loop.time() < end:
            before = loop.time()
            await asyncio.sleep(0.010)
            delays.append(loop.time() - before - 0.010)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        built = sum(pane.strips_built for pane in panes)
    delays.sort()
    p50 = delays[len(delays) // 2] * 1e3
    p99 = delays[int(len(delays) * 0.99)] * 1e3
    print(
        f"stall, 4 panes ({size.width}x{size.height}) streaming 4 KB chunks for {seconds:.0f} s: "
        f"loop delay p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {delays[-1] * 1e3:.1f} ms; "
        f"{fed / seconds / 1e6:.1f} MB/s fed in total, {built} rows rendered; "
        f"target p99 <= 50 ms: {50 / max(p99, 1e-3):.1f}x headroom"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["record", "correct", "parse", "render", "stall", "all"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.what == "record":
        record()
    if args.what in ("correct", "all"):
        correct()
    if args.what in ("parse", "all"):
        parse(args.runs)
    if args.what in ("render", "all"):
        asyncio.run(_render(20_000_000))
    if args.what in ("stall", "all"):
        asyncio.run(_stall(args.seconds))


if __name__ == "__main__":
    main()
