"""`hive-office` in a real tmux (TERM=tmux-256color) with real claude agents against scripted
Messages APIs: the map, a pane's content, a pane switch, and a typed prompt reaching the
agent, all read back with capture-pane."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.demo.scripted_model import turn, user_says
from tests.claude_office import BIN, CLAUDE, ClaudeOffice, make_claude_office
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
    pytest.mark.skipif(
        shutil.which("tmux") is None, reason="tmux not installed (scripts/setup installs it)"
    ),
]


class Tmux:
    def __init__(self, root: Path) -> None:
        conf = root / "tmux.conf"
        # What our users run: tmux's 256-colour terminal, not the 'screen' default.
        conf.write_text("set -g default-terminal tmux-256color\n")
        self.base = ["tmux", "-S", str(root / "tmux.sock"), "-f", str(conf)]

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            [*self.base, *args], capture_output=True, text=True, check=True
        ).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "office")

    def wait_screen(self, needle: str, timeout: float = 60) -> str:
        last = [""]

        def shown() -> str:
            last[0] = self.screen()
            return last[0] if needle in last[0] else ""

        try:
            return wait_for(shown, f"{needle!r} on screen", timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; the screen was:\n{last[0]}") from None


@pytest.fixture
def office_in_tmux(short_tmp: Path) -> Iterator[tuple[ClaudeOffice, Tmux]]:
    root = short_tmp
    office = make_claude_office(
        root,
        {
            "jim": [
                turn(user_says("hello from tmux"), "Hello back from Jim, the scripted engineer.")
            ],
        },
    )
    tmux = Tmux(root)
    # TERM and TMUX come from tmux itself, as for a person's pane.
    env = " ".join(
        f"{k}='{v}'"
        for k, v in office.env.items()
        if k.isidentifier() and k not in ("TERM", "TMUX", "TMUX_PANE")
    )
    tmux(
        "new-session",
        "-d",
        "-s",
        "office",
        "-x",
        "160",
        "-y",
        "48",
        f"env {env} {BIN / 'hive-office'} --home {office.home}; sleep 30",
    )
    try:
        yield office, tmux
    finally:
        if office.registry():
            # The office outlives the app (issue 11): `stop` ends it, and the app with it.
            subprocess.run(
                [BIN / "hive-office", "stop", "--home", str(office.home)], capture_output=True
            )
            wait_for(lambda: "Michael" not in tmux.screen(), "the app to leave", 30)
            wait_for(lambda: not office.agent_pids(), "the office to stop its agents", 30)
        subprocess.run([*tmux.base, "kill-server"], check=False)
        office.close()


def test_office_in_tmux(office_in_tmux: tuple[ClaudeOffice, Tmux]) -> None:
    office, tmux = office_in_tmux
    # The floor: both agents on the map, the manager's pane focused, claude running in it.
    tmux.wait_screen("Michael")
    tmux.wait_screen("Jim")
    app_pid = int(tmux("display", "-p", "-t", "office", "#{pane_pid}").strip())
    environ = Path(f"/proc/{app_pid}/environ").read_bytes().split(b"\0")
    assert b"TERM=tmux-256color" in environ
    wait_for(
        lambda: all(
            office.registry().get(a, {}).get("status") == "idle" for a in ("michael", "jim")
        ),
        "both claude agents up",
        90,
    )
    tmux.wait_screen("1 Michael")
    # The agents see a plain xterm, not the person's tmux.
    agent_env = Path(f"/proc/{office.registry()['jim']['pid']}/environ").read_bytes().split(b"\0")
    assert b"TERM=xterm-256color" in agent_env
    assert not [v for v in agent_env if v.startswith((b"TMUX=", b"TMUX_PANE="))]
    # Switch to Jim's pane with alt+2, then type a prompt into Claude Code there.
    tmux("send-keys", "-t", "office", "M-2")
    tmux.wait_screen("2 Jim")
    time.sleep(0.5)
    tmux("send-keys", "-t", "office", "-l", "hello from tmux")
    time.sleep(0.5)
    tmux("send-keys", "-t", "office", "Enter")
    office.models["jim"].wait_for(lambda r: r.turn == 0, 60)
    tmux.wait_screen("Hello back from Jim")
    assert office.models["jim"].scenario.done
    assert not [
        r for r in office.models["michael"].main_requests if "hello from tmux" in str(r.body)
    ], "the prompt went to Jim only"
    # The pane switch and the prompt went through the office: its hooks saw Jim's turn.
    wait_for(
        lambda: any("UserPromptSubmit" in e["detail"] for e in office.log("jim")),
        "jim's turn in the log",
    )
