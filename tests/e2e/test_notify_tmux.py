"""Issue 14: the app in a real tmux rings once for a message to `human`: tmux sets the
bell flag on the app's window (a BEL reached it), and the desktop notifications were
written inside tmux's DCS passthrough (the pane's raw output, captured by pipe-pane)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.mail import write_draft
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Draft
from tests.app.test_app_keys import Tmux, _home
from tests.support import wait_for


def osc9(text: str) -> bytes:
    """An OSC 9 notification as the app writes it inside tmux (ESC doubled in a DCS)."""
    return f"\x1bPtmux;\x1b\x1b]9;hive-office: {text}\x07\x1b\\".encode()


@pytest.fixture
def office_in_tmux(short_tmp: Path) -> Iterator[tuple[HivePaths, Tmux]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (scripts/setup installs it)")
    paths = _home(short_tmp)
    tmux = Tmux(paths.home.parent)
    conf = paths.home.parent / "tmux.conf"
    conf.write_text(conf.read_text() + "set -g allow-passthrough on\n")
    app = Path(sys.executable).parent / "hive-office"
    tmux(
        "new-session", "-d", "-s", "office", "-x", "120", "-y", "30",
        f"{app} --home {paths.home}; sleep 30",
    )  # fmt: skip
    try:
        yield paths, tmux
    finally:
        # The office outlives the app (issue 11): stop it, then end tmux.
        subprocess.run([app, "stop", "--home", str(paths.home)], capture_output=True)
        subprocess.run([*tmux.base, "kill-server"], check=False)


def test_a_message_to_human_rings_once_through_tmux(
    office_in_tmux: tuple[HivePaths, Tmux],
) -> None:
    paths, tmux = office_in_tmux
    tmux.wait("READY in michael's pane", lambda s: "READY" in s)
    out = paths.home.parent / "pane.out"
    tmux("pipe-pane", "-t", "office:0", "-O", f"cat >> {out}")
    # The person looks at another window: the app's window collects the bell.
    tmux("new-window", "-t", "office:1")

    def bell_flag() -> str:
        return tmux("display", "-p", "-t", "office:0", "#{window_bell_flag}").strip()

    assert bell_flag() == "0"
    write_draft(paths.mailbox("jim"), Draft(to=HUMAN, act="query", subject="Vendor A?"))
    wait_for(lambda: bell_flag() == "1", "tmux's bell flag on the app's window")
    assert "!" in tmux("display", "-p", "-t", "office:0", "#{window_flags}")
    wait_for(lambda: out.exists() and osc9("jim: Vendor A?") in out.read_bytes(), "the OSC 9")
    assert b"\x1b\x1b]777;notify;hive-office;jim: Vendor A?\x07" in out.read_bytes()
    # Another item rings on its own; the first is never written again.
    write_draft(paths.mailbox("pam"), Draft(to=HUMAN, act="query", subject="Vendor B?"))
    wait_for(lambda: osc9("pam: Vendor B?") in out.read_bytes(), "the second OSC 9")
    raw = out.read_bytes()
    assert raw.count(osc9("jim: Vendor A?")) == 1 and raw.count(osc9("pam: Vendor B?")) == 1
