"""No desk becomes the person (issue 24): a real `hive-office serve` whose desks are
shells, each attack run from a desk's own terminal, each refusal shown beside the
person's own way of doing the same thing.

- what an agent leaves behind when its terminal ends (`setsid -f`, a daemon's double
  fork) is adopted by the office, acts for nobody (not even with a secret read from
  another desk's environment), is reaped when it exits and ended when the office stops;
- the person's verbs that run outside the office (stop, merge, worktree remove, hire
  with no office) are refused to a desk's process, by the office while it runs and by
  the process's identity when none does.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from hive_core.desks.strays import subreaper
from hive_core.hive import init_office
from hive_core.office import daemon
from hive_core.paths import HivePaths
from tests.conftest import Running
from tests.support import short_dir, wait_for

BIN = Path(sys.executable).parent
SHELL = 'provider = "shell"\ncommand = ["bash", "--norc", "--noprofile", "-i"]\n'
DESKS = ("michael", "jim", "pam", "ryan", "kelly")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


class Done(NamedTuple):
    rc: int
    out: str


class Office:
    """A served office of shell desks working in one repository; `desks` of DESKS."""

    def __init__(self, root: Path, desks: tuple[str, ...] = DESKS) -> None:
        self.root = root
        self.scratch = root / "scratch"
        self.scratch.mkdir()
        self.repo = root / "repo"
        self.repo.mkdir()
        git(self.repo, "init", "-q", "-b", "main")
        git(self.repo, "config", "user.email", "person@example.com")
        git(self.repo, "config", "user.name", "Person")
        (self.repo / "a.txt").write_text("a\n")
        git(self.repo, "add", ".")
        git(self.repo, "commit", "-qm", "init")
        self.paths = HivePaths(root / "home")
        self.paths.home.mkdir()
        # Uncontained desks (contain = false): these attacks are about attribution, and
        # a contained desk could not even write the scratch folder or read another desk's
        # environment (tests/e2e/test_contained_desks.py); remote desks run so anyway.
        self.paths.office_toml.write_text(
            '[office]\nmanager = "michael"\ncontain = false\n'
            + "".join(
                f'\n[[agents]]\nid = "{d}"\nname = "{d.title()}"\n{SHELL}cwd = "{self.repo}"\n'
                for d in desks
            )
        )
        init_office(self.paths)
        self._count = itertools.count()
        self.desks = desks
        self.proc: subprocess.Popen[bytes] | None = None

    def serve(self) -> Office:
        """`hive-office serve`, a child of this test."""
        self.proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(self.paths.home)],
            env=self.env(),
            stdout=(self.root / "serve.out").open("w"),
            stderr=subprocess.STDOUT,
        )
        self.office_pid = self.proc.pid
        return self.started()

    def detach(self) -> Office:
        """The office as `hive-office` starts it: double-forked, in a systemd scope where
        a user manager runs (office/daemon.py)."""
        self.office_pid = daemon.start(self.paths).pid
        return self.started()

    def started(self) -> Office:
        wait_for(lambda: all(self.pid(d) for d in self.desks), "the desks to start")
        return self

    def running(self) -> bool:
        return daemon.running_pid(self.paths) == self.office_pid

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
        env["HIVE_HOME"] = str(self.paths.home)
        return {**env, **extra}

    def registry(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.paths.registry.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {e["id"]: e for e in data["agents"]}

    def pid(self, desk: str) -> int | None:
        pid = self.registry().get(desk, {}).get("pid")
        return pid if isinstance(pid, int) else None

    def person(self, *args: str, **env: str) -> Done:
        """A command of the person's own terminal: no process of the office's."""
        done = subprocess.run(
            [str(BIN / args[0]), *args[1:]],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Done(done.returncode, done.stdout + done.stderr)

    def type(self, desk: str, text: str) -> None:
        typed = self.person("hive-office", "type", desk, text)
        assert typed.rc == 0, typed.out

    def in_desk(self, desk: str, command: str) -> Done:
        """`command` typed into `desk`'s terminal; its exit code and output."""
        out, rc = self._files()
        self.type(desk, f"{{ {command} ; }} >{out} 2>&1; echo $? >{rc}")
        return self._result(out, rc, f"`{command}` in {desk}")

    def _files(self) -> tuple[Path, Path]:
        n = next(self._count)
        return self.scratch / f"{n}.out", self.scratch / f"{n}.rc"

    @staticmethod
    def _result(out: Path, rc: Path, what: str) -> Done:
        wait_for(lambda: rc.exists() and rc.read_text().endswith("\n"), what)
        return Done(int(rc.read_text()), out.read_text())

    def left_behind(
        self, desk: str, start: str, before: list[str], after: list[str], then: str = ""
    ) -> tuple[int, list[Done], list[Done]]:
        """A script `start`ed from `desk`'s terminal (`start` holds `{script}`): it runs
        `before` while the desk lives, waits until the desk's shell has exited and the
        office adopted it, then runs `after`, and last `then`. Its pid and each
        command's result."""
        name = f"left{next(self._count)}"
        pid_file = self.scratch / f"{name}.pid"
        outs = [self._files() for _ in [*before, *after]]
        run = [
            f"{{ {command} ; }} >{out} 2>&1; echo $? >{rc}"
            for command, (out, rc) in zip([*before, *after], outs, strict=True)
        ]
        script = self.scratch / f"{name}.sh"
        script.write_text(
            f"echo $$ >{pid_file}\n"
            + "\n".join(run[: len(before)])
            + "\n# Adopted: the desk's shell is gone and the office is this one's parent.\n"
            + f'while [ "$(cut -d" " -f4 /proc/$$/stat)" != "{self.office_pid}" ]; do\n'
            + "  sleep 0.05\ndone\n"
            + "\n".join(run[len(before) :])
            + f"\n{then}\n"
        )
        self.type(desk, start.format(script=script))
        wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"), name)
        done_before = [self._result(o, r, f"{name} before") for o, r in outs[: len(before)]]
        self.type(desk, "exit")
        done_after = [self._result(o, r, f"{name} after") for o, r in outs[len(before) :]]
        return int(pid_file.read_text()), done_before, done_after

    def secret_of(self, desk: str) -> str:
        """What any process of the user can read: a desk's environment."""
        environ = Path(f"/proc/{self.pid(desk)}/environ").read_bytes().split(b"\0")
        return next(v for v in environ if v.startswith(b"HIVE_SECRET=")).split(b"=", 1)[1].decode()

    def board(self) -> str:
        return (self.paths.hive / "board.md").read_text()


@pytest.fixture(scope="module")
def office() -> Iterator[Office]:
    with short_dir() as root:
        running = Office(root).serve()
        try:
            yield running
        finally:
            if running.running():
                daemon.stop(running.paths)


def gone(pid: int) -> bool:
    """Exited and reaped (a zombie still has its /proc entry)."""
    return not Path(f"/proc/{pid}").exists()


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


STRAY = "in no agent's session"


def test_a_desks_setsid_orphan_acts_for_nobody_and_is_reaped(office: Office) -> None:
    michael = office.pid("michael")
    marker = office.scratch / "typed-by-the-orphan"
    steal = (
        f"HIVE_AGENT_ID=michael HIVE_SECRET=$(tr '\\0' '\\n' </proc/{michael}/environ "
        "| sed -n 's/^HIVE_SECRET=//p') hive board --text '# stolen'"
    )
    pid, before, after = office.left_behind(
        "ryan",
        "setsid -f sh {script}",
        before=["hive-office pause pam"],
        after=[
            "hive-office pause pam",
            f"hive-office type michael 'touch {marker}'",
            steal,
            "hive inbox",  # as ryan, with ryan's own secret, which it inherited
            "env -u HIVE_AGENT_ID -u HIVE_SECRET hive-office stop",
            "env -u HIVE_AGENT_ID -u HIVE_SECRET hive-office hire toby --name Toby "
            "--provider shell",
            "hive-office status",  # reads only: anyone below the office may ask
        ],
    )
    # While ryan's shell lived, its orphan was ryan's (the CLI adopted it).
    assert before[0].rc == 1 and "you are ryan" in before[0].out, before[0].out
    pause, typed, stolen, inbox, stop, hire, status = after
    for refused in (pause, typed, stolen, inbox, stop, hire):
        assert refused.rc == 1 and STRAY in refused.out, refused.out
    assert "`pause` is the person's" in pause.out and "`stop` is the person's" in stop.out
    assert status.rc == 0 and '"michael"' in status.out, status.out
    assert "# stolen" not in office.board()
    assert not office.registry()["pam"]["paused"]
    assert "toby" not in office.registry()
    assert office.running()
    # The office waited for it: no zombie is left behind.
    wait_for(lambda: gone(pid), "the orphan to be reaped")
    # The person's own pause and typing still work.
    assert office.person("hive-office", "pause", "pam").rc == 0
    wait_for(lambda: office.registry()["pam"]["paused"], "the person's pause")
    assert office.person("hive-office", "resume", "pam").rc == 0
    wait_for(lambda: not office.registry()["pam"]["paused"], "the person's resume")
    office.type("michael", f"touch {marker}")
    wait_for(marker.exists, "the person's typing")


def test_a_daemons_double_fork_is_adopted_and_acts_for_nobody(office: Office) -> None:
    michael = office.pid("michael")
    steal = (
        f"HIVE_AGENT_ID=michael HIVE_SECRET=$(tr '\\0' '\\n' </proc/{michael}/environ "
        "| sed -n 's/^HIVE_SECRET=//p') hive board --text '# daemon'"
    )
    # A daemon's start: fork, a session of its own, fork again, the middle one exits.
    pid, before, after = office.left_behind(
        "kelly",
        "( setsid sh -c 'sh {script} &' & )",
        before=["hive inbox"],
        after=["hive-office halt michael", steal, "hive inbox"],
    )
    assert before[0].rc == 0, before[0].out
    for refused in after:
        assert refused.rc == 1 and STRAY in refused.out, refused.out
    assert "# daemon" not in office.board()
    wait_for(lambda: gone(pid), "the daemon to be reaped")
    # The manager's own board write still works, from its own terminal.
    board = office.in_desk("michael", "hive board --text '# the plan'")
    assert board.rc == 0, board.out
    wait_for(lambda: "# the plan" in office.board(), "the manager's board")


def test_a_stolen_secret_is_nothing_from_outside_the_desk(office: Office) -> None:
    stolen = office.person(
        "hive",
        "board",
        "--text",
        "# borrowed",
        HIVE_AGENT_ID="michael",
        HIVE_SECRET=office.secret_of("michael"),
    )
    assert stolen.rc == 1 and "michael is running" in stolen.out, stolen.out
    # From another desk's terminal it is "you are jim", whatever the secret.
    from_jim = office.in_desk(
        "jim",
        f"HIVE_AGENT_ID=michael HIVE_SECRET={office.secret_of('michael')} hive board "
        "--text '# borrowed'",
    )
    assert from_jim.rc == 1 and "you are jim" in from_jim.out, from_jim.out
    assert "# borrowed" not in office.board()


def hook_log(office: Office, desk: str) -> list[str]:
    lines = [json.loads(line) for line in office.paths.log.read_text().splitlines() if line]
    return [e["detail"] for e in lines if e.get("kind") == "hook" and e.get("agent") == desk]


# A hook frame as cth-hook sends it, from $HIVE_AGENT_ID/$HIVE_SECRET, to the office's
# hook socket: prints the office's reply line, or that none came (a refused frame).
HOOK_CLIENT = """
import json, os, socket
frame = {"agent": os.environ["HIVE_AGENT_ID"], "secret": os.environ["HIVE_SECRET"],
         "event": {"hook_event_name": "SessionStart", "session_id": "s"}}
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["HIVE_SOCKET"])
s.sendall(json.dumps(frame).encode() + b"\\n")
print(s.makefile("rb").readline().decode().strip() or "no reply")
"""


def test_a_stolen_secret_sends_no_hook_as_its_desk(office: Office) -> None:
    client = office.scratch / "hook_client.py"
    client.write_text(HOOK_CLIENT)
    forged = office.in_desk(
        "jim",
        f"HIVE_AGENT_ID=michael HIVE_SECRET={office.secret_of('michael')} "
        f"{sys.executable} {client}",
    )
    assert forged.rc == 0 and forged.out.strip() == "no reply", forged.out
    log = "\n".join(hook_log(office, "michael"))
    assert "refused a hook frame: its secret from jim's process" in log
    # michael's own frame, from michael's terminal, is answered.
    own = office.in_desk("michael", f"{sys.executable} {client}")
    assert own.rc == 0 and json.loads(own.out)["exit"] == 0, own.out


def test_stop_merge_and_worktree_remove_are_the_persons_alone(office: Office) -> None:
    jim = office.paths.worktree("jim")
    (jim / "j.txt").write_text("jim's work\n")
    git(jim, "add", "j.txt")
    git(jim, "commit", "-qm", "jim's work")
    for verb, args in (
        ("stop", ""),
        ("merge", " jim --yes"),
        ("worktree remove", " jim"),
        ("worktree remove", " pam"),
    ):
        refused = office.in_desk("jim", f"hive-office {verb}{args}")
        assert refused.rc == 1 and "you are jim" in refused.out, (verb, refused.out)
        assert f"`{verb}` is the person's to do" in refused.out, refused.out
    # `hive merge` is the manager's, and the person's.
    assert office.in_desk("jim", "hive merge jim").rc == 1
    assert not (office.repo / "j.txt").exists()
    assert jim.is_dir() and office.paths.worktree("pam").is_dir()
    assert office.running() and office.person("hive-office", "status").rc == 0

    merged = office.person("hive-office", "merge", "jim", "--yes")
    assert merged.rc == 0, merged.out
    assert (office.repo / "j.txt").read_text() == "jim's work\n"


def test_the_person_stops_the_office_and_what_was_left_behind_ends_with_it(
    office: Office,
) -> None:
    # A long-lived leftover of a desk whose shell then ended: the office's now.
    pid_file = office.scratch / "sleeper.pid"
    start = f"setsid -f sh -c 'echo $$ >{pid_file}; exec sleep 600'"
    office.type("pam", start)
    wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"), "the sleeper")
    sleeper = int(pid_file.read_text())
    office.type("pam", "exit")
    wait_for(lambda: parent(sleeper) == office.office_pid, "the office to adopt the sleeper")

    stopped = office.person("hive-office", "stop")
    assert stopped.rc == 0, stopped.out
    assert office.proc is not None and office.proc.wait(timeout=60) == 0
    wait_for(lambda: gone(sleeper), "the sleeper to end with the office")

    # No office: a process holding a desk's identity is not the person.
    as_jim = office.person("hive-office", "worktree", "remove", "jim", HIVE_AGENT_ID="jim")
    assert as_jim.rc == 1 and "HIVE_AGENT_ID=jim" in as_jim.out, as_jim.out
    with_secret = office.person("hive-office", "stop", HIVE_SECRET="anything")
    assert with_secret.rc == 1 and "holds an agent's identity" in with_secret.out
    hire = office.person(
        "hive-office",
        "hire",
        "toby",
        "--name",
        "Toby",
        "--provider",
        "shell",
        HIVE_AGENT_ID="jim",
    )
    assert hire.rc == 1 and "holds an agent's identity" in hire.out, hire.out
    assert "toby" not in office.paths.office_toml.read_text()
    removed = office.person("hive-office", "worktree", "remove", "jim")
    assert removed.rc == 0, removed.out
    assert not office.paths.worktree("jim").exists()


def test_a_detached_office_adopts_what_a_desk_leaves_and_ends_it_at_stop(
    short_tmp: Path,
) -> None:
    office = Office(short_tmp, desks=("michael", "jim")).detach()
    try:
        pid, _, after = office.left_behind(
            "jim",
            "setsid -f sh {script}",
            before=[],
            after=["hive-office pause michael"],
            then="exec sleep 600",
        )
        refused = after[0]
    except BaseException:
        daemon.stop(office.paths)
        raise
    assert refused.rc == 1 and STRAY in refused.out, refused.out
    assert not office.registry()["michael"]["paused"]
    assert parent(pid) == office.office_pid  # the sleep the script became
    assert office.person("hive-office", "stop").rc == 0
    wait_for(lambda: gone(pid), "what jim left behind to end with the office")


def test_a_program_hosting_the_office_gets_its_own_orphans_back(short_tmp: Path) -> None:
    """The office adopts orphans only while it runs: a test or a program that hosts it in
    its own process is no subreaper before or after."""
    assert not subreaper()
    paths = HivePaths(short_tmp / "home")
    init_office(paths)
    hosted = Running(paths)
    try:
        wait_for(subreaper, "the hosted office to adopt orphans")
    finally:
        hosted.close()
    assert not subreaper()
