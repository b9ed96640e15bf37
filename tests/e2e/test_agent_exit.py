"""An agent CLI that exits as soon as it starts is left exited with its code and what to
do (not started again into the same failure), `doctor` names it; a hookless agent is
`running` with its pid while its process runs. Real `hive-office serve` processes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.agents.claude import ClaudeProvider
from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_tui.app import HiveApp
from tests.serve_support import ServedOffice
from tests.support import office_of, until, wait_for

BIN = Path(sys.executable).parent
CLAUDE_HINT = ClaudeProvider().start_hint()
# jim is a claude agent whose program says why and exits 3 until the file `ok` exists
# next to the home; then it runs. It has a login (a token in its env), so its failure
# is the CLI's own; a desk without one waits for it (tests/e2e/test_first_start_login.py).
JIM = 'echo "no login here"; test -e {ok} || exit 3; exec sleep 600'


def roster(root: Path) -> str:
    return (
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\ncwd = "{root}"\n'
        'command = ["sh"]\n\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\nprovider = "claude"\ncwd = "{root}"\n'
        f"command = ['sh', '-c', '{JIM.format(ok=root / 'ok')}']\n"
        'env = { ANTHROPIC_AUTH_TOKEN = "not-a-real-token" }\n'
    )


@pytest.fixture
def office(short_tmp: Path) -> Iterator[ServedOffice]:
    office = ServedOffice(short_tmp / "home", roster=roster(short_tmp))
    try:
        yield office
    finally:
        if office.running():
            assert office.stop() == 0


def test_a_cli_that_exits_at_once_is_left_exited_and_doctor_says_why(office: ServedOffice) -> None:
    office.start()
    failed = wait_for(
        lambda: [d for d in office.agent_log("jim") if d.startswith("could not start")],
        "jim's failed start in the log",
    )
    assert "exited (code 3)" in failed[0] and CLAUDE_HINT in failed[0]
    # Not started again into the same failure: watched for a few seconds, one start.
    window = time.monotonic() + 3
    while time.monotonic() < window:
        assert len(office.starts("jim")) == 1, office.agent_log("jim")
        time.sleep(0.1)
    wait_for(lambda: office.registry().get("jim", {}).get("status") == "exited", "jim exited")

    doctor = office.run("hive-office", "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert "agent:jim: exited (code 3)" in doctor.stdout and CLAUDE_HINT in doctor.stdout
    assert "hive-office spawn jim" in doctor.stdout
    assert "agent:michael" not in doctor.stdout, "a running agent is not a problem"

    # The person fixes the cause and retries: it runs, and doctor has nothing to say of it.
    (office.home.parent / "ok").write_text("")
    spawned = office.run("hive-office", "spawn", "jim")
    assert spawned.returncode == 0, spawned.stderr
    wait_for(lambda: len(office.starts("jim")) == 2, "jim's second start")
    wait_for(lambda: office.registry().get("jim", {}).get("pid"), "jim running")
    doctor = office.run("hive-office", "doctor")
    assert "agent:jim" not in doctor.stdout, doctor.stdout
    assert doctor.returncode == 0, doctor.stdout


def test_a_session_that_cannot_be_resumed_is_tried_afresh_once(office: ServedOffice) -> None:
    """A session from the last run is resumed first; when that dies at once the CLI is
    started afresh once, and when that dies too it is left exited: two starts, no loop."""
    registry = json.loads(office.paths.registry.read_text())
    for entry in registry["agents"]:
        if entry["id"] == "jim":
            entry["session_id"] = "0b6f5c1e-1a2b-4c3d-8e9f-0123456789ab"
    office.paths.registry.write_text(json.dumps(registry))
    office.start()
    wait_for(
        lambda: any(d.startswith("could not start") for d in office.agent_log("jim")),
        "jim's failed start in the log",
    )
    window = time.monotonic() + 3
    while time.monotonic() < window:
        assert len(office.starts("jim")) == 2, office.agent_log("jim")
        time.sleep(0.1)
    resumed, fresh = office.starts("jim")
    assert "resuming 0b6f5c1e" in resumed and "resuming" not in fresh


def test_a_running_shell_is_running_with_its_pid_in_the_roster(office: ServedOffice) -> None:
    office.start()

    def shown() -> tuple[int, str] | None:
        pid = office.registry().get("michael", {}).get("pid")
        roster = office.run("hive", "roster").stdout
        return (pid, roster) if pid and f"running (pid {pid})" in roster else None

    pid, roster = wait_for(shown, "michael running with its pid in `hive roster`")
    line = next(line for line in roster.splitlines() if line.startswith("michael"))
    assert f"running (pid {pid})" in line
    program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    assert Path(program.decode()).name == "sh", "the pid is the shell's own"
    # Ended, it is no longer running.
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: office.registry().get("michael", {}).get("status") == "exited",
        "michael's exit in the registry",
    )
    roster = office.run("hive", "roster").stdout
    assert "running" not in roster, roster


async def test_the_pane_title_keeps_the_code_and_the_hint_and_the_screen(short_tmp: Path) -> None:
    root = short_tmp
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(roster(root))
    init_office(paths)
    app = HiveApp(Office(paths, program=hive))
    async with app.run_test(size=(200, 48)) as pilot:
        jim = app.pane("jim")
        title = await until(
            pilot,
            lambda: "exited" in str(jim.border_title) and str(jim.border_title),
            "jim's title",
        )
        assert "exited (code 3) at start" in title and "ctrl+] r retries" in title
        # Its last screen stays: the CLI's own words are still there, and under them the
        # hint, wrapped inside the pane (issue 23: it ran past the border).
        await pilot.press("alt+2")
        await until(pilot, lambda: jim.size.height, "jim's pane shown")
        lines = [jim.render_line(y).text for y in range(jim.size.height)]
        assert "no login here" in "\n".join(lines)
        assert all(len(line) == jim.size.width for line in lines)
        hint = " ".join(" ".join(lines).split())
        failed = office_of(app).states["jim"].start_failed
        assert failed and "right after it started" in failed
        assert hint.endswith(" ".join(f"{failed} ctrl+] r to retry.".split()))
        pid = await until(pilot, lambda: office_of(app).states["michael"].pid, "michael's pid")
        assert f"running (pid {pid})" in str(app.pane("michael").border_title)
        await pilot.press("ctrl+right_square_bracket", "q")
