"""Terminal pane benchmarks (prints, never asserts).

  record   run the real claude CLI in a pty against the scripted model for a few turns with
           tool calls and keep the raw bytes it wrote: tests/fixtures/claude_session.bin
           (+ .json with the size it ran at)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pexpect

from hive_core.claude_env import claude_environment, write_claude_config
from hive_core.scripted_model import (
    Scenario,
    ScriptedModel,
    ToolUse,
    bash,
    has_tool_result,
    turn,
    user_says,
)

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
            turn(user_says("fix the tokenizer"), PLAN, bash(listing, "List the project"), delay=THINK_S),
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
            turn(has_tool_result(), "Running the tests.", bash("seq 1 200 | paste - - - -"), delay=THINK_S),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["record"])
    args = parser.parse_args()
    if args.what == "record":
        record()


if __name__ == "__main__":
    main()
