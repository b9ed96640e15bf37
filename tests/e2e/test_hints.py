"""One voice for hints (issue 23): every next-step hint names `hive-office` with the
`--home` in use (never `serve`, never `kill PID`), and the command it names works when
typed. Real processes: `hive-office init`, the app in a real tmux, a refused `serve`,
`doctor`, a served office's verbs; each hint is cut out of what was printed and run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.office import daemon
from hive_core.paths import HivePaths
from tests.serve_support import served
from tests.support import wait_for
from tests.tmux_support import BIN, Tmux, tmux_env, write_office

# The environment of a person who has no HIVE_HOME: the hints must carry --home.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
ENV["PATH"] = f"{BIN}{os.pathsep}{ENV.get('PATH', '')}"


def hive_office(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "hive-office"), *args], env=ENV, capture_output=True, text=True, timeout=120
    )


def hints(text: str) -> list[str]:
    """The `hive-office ...` commands a text names, in backquotes."""
    return [c for c in re.findall(r"`([^`]+)`", text) if c.startswith("hive-office")]


def run_hint(command: str, **fill: str) -> subprocess.CompletedProcess[str]:
    """Run a hinted command as the person would type it (placeholders filled in)."""
    argv = [fill.get(word, word) for word in shlex.split(command)]
    assert argv[0] == "hive-office", command
    return hive_office(*argv[1:])


@pytest.fixture
def home(short_tmp: Path) -> Iterator[Path]:
    home = write_office(short_tmp)  # two shell agents, a0 (the manager) and a1
    yield home
    if daemon.running_pid(HivePaths(home)) is not None:
        daemon.stop(HivePaths(home))


def test_a_home_without_an_office_names_the_init_for_it(short_tmp: Path) -> None:
    """doctor and a verb, pointed at a folder with no office, name the init of that folder;
    typed, it makes the office they then find."""
    home = short_tmp / "elsewhere"
    doctor = hive_office("doctor", "--home", str(home))
    assert doctor.returncode == 1
    [init] = hints(doctor.stdout)
    assert init == shlex.join(["hive-office", "--home", str(home), "init"])
    inbox = subprocess.run(
        [str(BIN / "hive"), "inbox", "--home", str(home)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert inbox.returncode != 0 and hints(inbox.stderr) == [init]
    made = run_hint(init)
    assert made.returncode == 0, made.stderr
    assert hive_office("doctor", "--home", str(home)).stdout.count("no office in") == 0


def test_init_names_the_office_and_a_refused_serve_names_stop(home: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed; scripts/setup installs it")
    paths = HivePaths(home)
    init = hive_office("init", "--home", str(home))
    assert init.returncode == 0, init.stderr
    [open_it] = hints(init.stdout.splitlines()[-1])
    assert open_it == shlex.join(["hive-office", "--home", str(home)])

    doctor = hive_office("doctor", "--home", str(home))
    assert f"office not running (`{open_it}` starts it)" in doctor.stdout

    # The hint, typed in a terminal: the office starts and shows itself.
    tmux = Tmux(home.parent, dict(tmux_env(home.parent), PATH=ENV["PATH"]))
    try:
        tmux("new-session", "-d", "-s", "office", "-x", "120", "-y", "40", open_it)
        wait_for(lambda: daemon.running_pid(paths), "the office started by the hint", 60)
        pid = daemon.running_pid(paths)

        refused = hive_office("serve", "--home", str(home), "--no-agents")
        assert refused.returncode == 1
        assert "kill" not in refused.stderr and f"pid {pid}" in refused.stderr
        shown, stop = hints(refused.stderr)
        assert shown == open_it
        assert stop == shlex.join(["hive-office", "--home", str(home), "stop"])
        stopped = run_hint(stop)
        assert stopped.returncode == 0, stopped.stderr
        assert daemon.running_pid(paths) is None and not daemon.alive(pid or 0)
    finally:
        tmux.kill()

    # With no office, a verb says so and names the command that starts one.
    why = hive_office("why", "--home", str(home), "a1")
    assert why.returncode == 1
    assert hints(why.stderr) == [open_it] and "serve" not in why.stderr
    # And what only a running office can prove (the manager writing the board) says so too.
    board = subprocess.run(
        [str(BIN / "hive"), "board", "--home", str(home), "--text", "# Plan"],
        env=dict(ENV, HIVE_AGENT_ID="a0"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert board.returncode != 0 and "must be running to prove" in board.stderr
    assert hints(board.stderr) == [open_it]


def test_a_served_offices_sentences_name_commands_that_work(home: Path) -> None:
    with served(home, agents=False, env=ENV) as office:
        at = ["--home", str(home)]
        paused = hive_office("pause", *at, "a1")
        assert paused.returncode == 0, paused.stderr
        [resume] = hints(paused.stdout)
        assert resume == shlex.join(["hive-office", *at, "resume", "a1"])
        resumed = run_hint(resume)
        assert resumed.returncode == 0 and resumed.stdout.strip() == "a1 is resumed."

        asked = office.run("hive", "send", "--to", "human", "--subject", "Which DB?", agent="a1")
        assert asked.returncode == 0, asked.stderr

        def listed_question() -> subprocess.CompletedProcess[str] | None:
            out = hive_office("escalations", *at)
            return out if "Which DB?" in out.stdout else None

        listed = wait_for(listed_question, "the question listed")
        [answer] = hints(listed.stdout)
        assert answer == shlex.join(["hive-office", *at, "answer", "ID", "TEXT"])
        item = listed.stdout.split("\n")[1].split()[0]
        answered = run_hint(answer, ID=item, TEXT="SQLite.")
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout.strip() == f"Your answer to {item} went to a1 and a0 (the manager)."

        refused = hive_office("answer", *at, "no-such-message", "yes")
        [escalations] = hints(refused.stderr)
        assert run_hint(escalations).stdout.strip() == "Nothing waits for you."

        # A shell desk has no hooks: a halt is refused, saying what to do instead, and
        # nothing is changed (its halting peers are in tests/unit/test_actions.py).
        halt = hive_office("halt", *at, "a1")
        assert halt.returncode == 1
        assert "a1 cannot be halted: its CLI (shell) has no hooks" in halt.stderr
        assert "ctrl+c" in halt.stderr and "next hook" not in halt.stderr
        assert office.registry()["a1"]["status"] != "archived"
        [archive] = hints(halt.stderr)
        assert archive == shlex.join(["hive-office", *at, "archive", "a1"])
        archived = run_hint(archive)
        assert archived.returncode == 0 and archived.stdout.strip() == "a1 is archived."
