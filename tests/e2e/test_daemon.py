"""The office as a process of its own (issue 11), end to end with real processes: started
by `hive-office` inside a real tmux, it outlives that tmux; a new tmux attaches and sees
what was printed meanwhile; `hive-office stop` ends every process and commits; kill -9
leaves no agent behind and the next start brings them back; `ls` lists what runs."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hive_core.hint import office_command
from hive_core.office import daemon
from hive_core.paths import HivePaths
from hive_core.schema import Registry
from tests.support import wait_for
from tests.tmux_support import (
    AGENTS,
    BIN,
    PREFIX_KEY,
    Tmux,
    crop,
    find_box,
    row_text,
    tmux_env,
    write_office,
)


class Place:
    """A root folder with an office of shell agents; whatever it started is ended at
    teardown (the office, every tmux server)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = HivePaths(write_office(self.root))
        self.env = tmux_env(self.root)
        self.servers: list[Tmux] = []

    def tmux(self, name: str) -> Tmux:
        """A tmux server of its own (its own socket): killing it touches no other."""
        folder = self.root / name
        folder.mkdir()
        tmux = Tmux(folder, self.env)
        self.servers.append(tmux)
        return tmux

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "hive-office"), *args], capture_output=True, text=True, check=check
        )

    def agent_pids(self) -> dict[str, int]:
        """The running agents' pids from the office's registry, once every agent has one."""

        def read() -> dict[str, int] | None:
            try:
                registry = msgspec.json.decode(self.paths.registry.read_bytes(), type=Registry)
            except (OSError, msgspec.DecodeError):
                return None
            pids = {
                a.id: a.pid for a in registry.agents if a.pid is not None and a.status != "offline"
            }
            return (
                pids if len(pids) == len(AGENTS) and all(map(daemon.alive, pids.values())) else None
            )

        return wait_for(read, "every agent running in the registry", 60)

    def close(self) -> None:
        if daemon.running_pid(self.paths) is not None:
            daemon.stop(self.paths)
        for tmux in self.servers:
            tmux.kill()


@pytest.fixture
def place(short_tmp: Path) -> Iterator[Place]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed; scripts/setup installs it")
    at = Place(short_tmp)
    yield at
    at.close()


def _screen(tmux: Tmux) -> list[str]:
    return [row_text(r) for r in tmux.capture("office")]


def _pane(tmux: Tmux) -> list[str]:
    """The text of the first agent's pane, cut out of the app's screen."""
    grid = tmux.capture("office")
    box = find_box(grid, f"1 {AGENTS[0][1]}")
    if box is None:
        return []
    return [row_text(r) for r in crop(grid, box.top, box.left, box.rows, box.cols)]


def _open_in(place: Place, tmux: Tmux, *verb: str) -> None:
    app = [str(BIN / "hive-office"), *verb, "--home", str(place.paths.home)]
    tmux(
        "new-session", "-d", "-s", "office", "-x", "160", "-y", "48",
        "-c", str(place.root), shlex.join(app),
    )  # fmt: skip
    try:
        wait_for(lambda: any(line.startswith("$") for line in _pane(tmux)), "a prompt", 60)
    except AssertionError:
        screen = "\n".join(_screen(tmux))
        log = daemon.log_tail(place.paths)
        raise AssertionError(
            f"no agent's prompt on screen:\n{screen}\noffice.log:\n{log}"
        ) from None


def _shows(tmux: Tmux, text: str) -> bool:
    return any(text in line for line in _pane(tmux))


def test_the_office_outlives_its_tmux_and_a_new_one_sees_what_was_printed_meanwhile(
    place: Place,
) -> None:
    first = place.tmux("first")
    _open_in(place, first)  # no office runs: `hive-office` starts one, then attaches
    office = daemon.running_pid(place.paths)
    assert office is not None and office != os.getpid()
    # Detached: no controlling terminal, and no session leader, so it can never get one.
    fields = Path(f"/proc/{office}/stat").read_text().rsplit(")", 1)[1].split()
    session, tty = int(fields[3]), int(fields[4])
    assert tty == 0 and session != office
    assert os.readlink(f"/proc/{office}/fd/0") == os.devnull
    assert os.readlink(f"/proc/{office}/fd/2") == str(place.paths.office_log)
    agents = place.agent_pids()
    place.cli("type", "--home", str(place.paths.home), AGENTS[0][0], "echo MARK-$((6*7))")
    wait_for(lambda: _shows(first, "MARK-42"), "the marker on screen", 30)

    first.kill()  # the terminal goes: the client with it, never the office
    done = place.root / "done"
    place.cli(
        "type", "--home", str(place.paths.home), AGENTS[0][0],
        f"seq -f 'gap-%03g' 1 120; echo AFTER-$((6*7)); touch {done}",
    )  # fmt: skip
    wait_for(done.exists, "the agent to print while nobody is attached", 30)
    wait_for(lambda: _listed(place) == (office, len(AGENTS), 0), "`ls`: no client attached")
    assert daemon.running_pid(place.paths) == office
    assert all(daemon.alive(pid) for pid in agents.values()), agents

    second = place.tmux("second")
    _open_in(place, second, "attach")
    assert daemon.running_pid(place.paths) == office
    assert place.agent_pids() == agents
    wait_for(lambda: _listed(place) == (office, len(AGENTS), 1), "`ls`: one client attached")
    wait_for(lambda: _shows(second, "AFTER-42"), "what was printed meanwhile, on screen", 30)
    # The scrollback the office kept while nobody watched: copy mode, search back.
    second.keys("office", PREFIX_KEY, "[")
    second.keys("office", "?", *"gap-001", "Enter")
    wait_for(lambda: _shows(second, "gap-001"), "the first line printed meanwhile", 30)
    second.keys("office", "?", *"MARK-42", "Enter")
    wait_for(lambda: _shows(second, "MARK-42"), "the marker above it", 30)

    third = place.tmux("third")
    _open_in(place, third)  # an office runs: `hive-office` attaches to it, starts none
    wait_for(lambda: _listed(place) == (office, len(AGENTS), 2), "`ls`: two clients attached")


def test_stop_ends_every_process_of_the_office_and_makes_the_last_commit(place: Place) -> None:
    home = str(place.paths.home)
    started = daemon.start(place.paths)
    assert started.pid == daemon.running_pid(place.paths)
    agents = place.agent_pids()
    listed = wait_for(
        lambda: [o for o in daemon.offices() if o.home == os.path.realpath(home)],
        "the office in `ls`",
    )
    assert [(o.pid, o.agents) for o in listed] == [(started.pid, len(AGENTS))]
    ls = place.cli("ls").stdout
    assert any(line.split()[:3] == [os.path.realpath(home), str(started.pid), str(len(AGENTS))]
               for line in ls.splitlines()), ls  # fmt: skip
    head = _git(place, "rev-parse", "HEAD")

    stopped = place.cli("stop", "--home", home)
    assert f"(pid {started.pid}) stopped" in stopped.stdout
    # stop returns once the office is gone; its agents went before it.
    assert not daemon.alive(started.pid)
    assert [pid for pid in agents.values() if daemon.alive(pid)] == []
    assert daemon.running_pid(place.paths) is None
    assert _git(place, "rev-parse", "HEAD") != head, "no last commit"
    assert _git(place, "status", "--porcelain") == "", "the hive was left uncommitted"
    assert os.path.realpath(home) not in place.cli("ls").stdout


def test_with_no_office_attach_and_stop_say_so_and_change_nothing(place: Place) -> None:
    home = str(place.paths.home)
    for verb in ("attach", "stop"):
        refused = place.cli(verb, "--home", home, check=False)
        assert refused.returncode == 1
        hint = office_command(place.paths.home)
        assert f"no office runs on {home}; `{hint}` starts one." in refused.stderr
    assert daemon.running_pid(place.paths) is None
    assert not place.paths.office_log.exists()
    # The allowed path, on the same home: one runs, stop ends it.
    started = daemon.start(place.paths)
    assert f"(pid {started.pid}) stopped" in place.cli("stop", "--home", home).stdout


def test_kill_9_of_the_office_leaves_no_agent_and_the_next_start_resumes(place: Place) -> None:
    started = daemon.start(place.paths)
    agents = place.agent_pids()
    os.kill(started.pid, signal.SIGKILL)
    wait_for(
        lambda: not any(daemon.alive(pid) for pid in [started.pid, *agents.values()]),
        f"the office and its agents {agents} gone",
        10,
    )
    assert daemon.running_pid(place.paths) is None
    assert os.path.realpath(place.paths.home) not in place.cli("ls").stdout

    again = daemon.start(place.paths)
    assert again.pid != started.pid
    resumed = place.agent_pids()
    assert set(resumed) == set(agents)
    assert not set(resumed.values()) & set(agents.values())


def _listed(place: Place) -> tuple[int, int, int] | None:
    """The home's line of `hive-office ls`: pid, agents running, clients attached."""
    home = os.path.realpath(place.paths.home)
    for line in place.cli("ls").stdout.splitlines():
        fields = line.split()
        if fields[:1] == [home] and all(f.isdigit() for f in fields[1:]):
            return int(fields[1]), int(fields[2]), int(fields[3])
    return None


def _git(place: Place, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(place.paths.hive), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_an_office_that_cannot_start_is_said_with_the_end_of_its_log(place: Place) -> None:
    git = place.paths.git_dir
    aside = git.with_name(".git.aside")
    git.rename(aside)  # the hive is no repository the office may commit on
    with pytest.raises(daemon.StartFailed) as failed:
        daemon.start(place.paths)
    said = str(failed.value)
    assert said.startswith("the office exited at start; the end of ")
    assert "not a git repository the office can use" in said
    assert daemon.running_pid(place.paths) is None
    # The same home with its repository back starts, and its log keeps both starts.
    aside.rename(git)
    started = daemon.start(place.paths)
    assert started.pid == daemon.running_pid(place.paths)
    assert place.paths.office_log.read_text().count(" UTC: ") == 2
