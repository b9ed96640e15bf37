"""The notice that an office runs outside a systemd scope is said once for a home (issue
23: the two-line notice came back after every detach), and the detach line names the
command that attaches to this home's office again. A person's shell in a real tmux:
`hive-office` starts the office and shows it, ctrl+] d detaches, `hive-office stop`, and
again; what the terminal holds afterwards is read from tmux itself."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from hive_core.hint import office_command
from hive_core.office import daemon
from hive_core.paths import HivePaths
from tests.support import wait_for
from tests.tmux_support import BIN, PREFIX_KEY, Tmux, tmux_env, write_office

NOTICE = "no systemd user manager runs here"


def test_the_unscoped_notice_is_said_once_per_home(short_tmp: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed; scripts/setup installs it")
    if daemon.systemd_user_manager():
        pytest.skip("a systemd user manager runs here: offices start in a scope, no notice")
    home = write_office(short_tmp)
    paths = HivePaths(home)
    env = dict(tmux_env(short_tmp), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("XDG_RUNTIME_DIR", None)
    tmux = Tmux(short_tmp, env)
    shell = shlex.join(["bash", "--norc", "--noprofile", "-i"])
    tmux("new-session", "-d", "-s", "me", "-x", "120", "-y", "40", shell)

    def terminal() -> str:
        return tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "me")

    def on_screen() -> bool:
        """The app holds the terminal (its alternate screen), not the shell."""
        return tmux("display", "-p", "-t", "me", "#{alternate_on}").strip() == "1"

    def app_screen() -> str:
        return tmux("capture-pane", "-p", "-t", "me")

    def open_and_detach(round_: int) -> None:
        tmux.type("me", f"hive-office --home {shlex.quote(str(home))}")
        wait_for(lambda: daemon.running_pid(paths), f"the office of start {round_}", 60)
        wait_for(lambda: on_screen() and "ctrl+] then" in app_screen(), "the app on screen", 60)
        tmux.keys("me", PREFIX_KEY, "d")
        wait_for(
            lambda: not on_screen() and terminal().count("the office keeps running") == round_,
            "the detach",
            60,
        )

    try:
        open_and_detach(1)
        tmux.type("me", f"hive-office --home {shlex.quote(str(home))} stop")
        wait_for(lambda: daemon.running_pid(paths) is None, "the office stopped", 60)
        open_and_detach(2)
        screen = terminal()
        assert "^]" not in screen, screen  # the detach key reached the app, not the shell
        assert screen.count(NOTICE) == 1, screen
        starts = [line for line in screen.splitlines() if "runs detached (pid" in line]
        assert len(starts) == 2, screen
        assert "Said once for this home." in starts[0]
        assert starts[1].endswith(f"runs detached (pid {daemon.running_pid(paths)}).")
        # The detach line names the command that comes back to this office; typed, it does.
        again = office_command(home)
        assert f"the office keeps running (`{again}` attaches again)." in screen
        tmux.type("me", again)
        wait_for(lambda: on_screen() and "ctrl+] then" in app_screen(), "attached again", 60)
        tmux.keys("me", PREFIX_KEY, "d")
        wait_for(lambda: terminal().count("the office keeps running") == 3, "the detach", 60)
        assert terminal().count(NOTICE) == 1
    finally:
        if daemon.running_pid(paths) is not None:
            daemon.stop(paths)
        tmux.kill()
