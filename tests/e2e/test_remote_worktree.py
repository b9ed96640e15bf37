"""A remote desk's git worktree lives on its host: a real `hive-office serve`, a real
sshd on 127.0.0.1 (the host is this machine, so a repository under the test's folder is
"on the host", and the worktree under the host's $HOME is this user's).

pam runs on the host with its roster cwd in a repository there: it starts in its own
worktree under <remote $HOME>/.hive-remote/<office key>/worktrees/pam, made and set up
there; `hive-office diff` and `merge` run git there through ssh; jim, a local desk on the
same repository, and pam are warned of a file both change; a host that cannot be reached
is a sentence, never a crash, and the overlap check skips it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from hive_core.config import load_office
from hive_core.mail import message_names
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.remote.plan import REMOTE_ROOT, remote_worktree_relative
from hive_core.schema import AgentSpec, Message
from hive_core.worktrees import NoFolder, RemoteGit, WorktreeKeeper, read_record
from hive_core.worktrees.plan import branch_name
from tests.serve_support import ServedOffice, served
from tests.sshd_support import SshHost, running_sshd
from tests.support import wait_for

SHELL = 'provider = "shell"\ncommand = ["bash", "--norc", "--noprofile", "-i"]\n'
SETUP = 'echo "$PWD" > "$HIVE_REPO/../setup-ran"'


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "person@example.com")
    git(repo, "config", "user.name", "Person")
    (repo / "a.txt").write_text("a\n")
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    return repo


def roster(host: SshHost, repo: Path) -> str:
    # The host's venv is this one: `hive` and `cth-hook` are installed there.
    return (
        f'[office]\nmanager = "michael"\nremote_venv = "{sys.prefix}"\n'
        f"worktree_setup = {json.dumps(SETUP)}\nworktree_check_s = 0.2\n\n"
        f'[[agents]]\nid = "michael"\nname = "Michael"\n{SHELL}\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\n{SHELL}cwd = "{repo}"\n\n'
        f'[[agents]]\nid = "pam"\nname = "Pam"\n{SHELL}cwd = "{repo}"\n'
        f'host = "{host.alias}"\nssh_args = {json.dumps(host.ssh_args)}\n'
    )


@pytest.fixture
def root(short_tmp: Path) -> Path:
    # Outside any repository: a folder inside one would give every agent a worktree of it.
    return short_tmp


def running(office: ServedOffice, agent: str) -> bool:
    status = office.registry().get(agent, {}).get("status")
    return bool(office.starts(agent)) and status in ("running", "idle")


def shell(office: ServedOffice, agent: str, line: str) -> None:
    done = office.run("hive-office", "type", "--home", str(office.home), agent, line)
    assert done.returncode == 0, done.stderr


def wrote(path: Path) -> str:
    """What a shell wrote into `path`, once it is complete (its last line is END)."""
    return wait_for(
        lambda: path.exists() and path.read_text().endswith("END\n") and path.read_text(),
        f"the shell to write {path.name}",
    )


def warned(office: ServedOffice, agent: str, about: str) -> list[str]:
    inbox = office.paths.mailbox(agent).inbox
    subjects = [json.loads((inbox / n).read_text())["subject"] for n in message_names(inbox)]
    return [s for s in subjects if about in s]


@pytest.fixture
def remote_home() -> Iterator[list[Path]]:
    """The host's office folders the test made (under this user's real $HOME: the host is
    this machine), removed afterwards: only the test office's key's own folder."""
    made: list[Path] = []
    yield made
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_remote_desk_works_diffs_and_merges_in_a_worktree_on_its_host(
    root: Path, remote_home: list[Path]
) -> None:
    repo = make_repo(root / "remote-work")
    home = root / "office"
    with running_sshd(root / "sshd") as host:
        said = host.run("printf '%s' \"$HOME\"")
        assert said.returncode == 0, said.stderr
        key = plan.office_key(home)
        remote_home.append(Path(said.stdout) / REMOTE_ROOT / key)
        worktree = f"{said.stdout}/{remote_worktree_relative(key, 'pam')}"
        with served(home, roster=roster(host, repo)) as office:
            wait_for(partial(running, office, "pam"), "pam's remote desk")
            wait_for(partial(running, office, "jim"), "jim's local desk")
            # pam's shell is in its worktree on the host, on its own branch, set up once there.
            shell(office, "pam", f'echo "$PWD|$(git symbolic-ref --short HEAD)|END" > {root}/pwd')
            cwd, branch, _ = wrote(root / "pwd").strip().split("|")
            assert cwd == worktree
            assert branch == branch_name("Scranton", str(home), "pam")
            assert (root / "remote-work" / "setup-ran").read_text() == f"{worktree}\n"
            record = read_record(office.paths, "pam")
            assert record is not None and record.host == host.alias
            assert (record.repo, record.path) == (str(repo), worktree)

            # pam commits a change and leaves one uncommitted and one untracked file; jim,
            # here, changes a.txt too: both (and the manager) are told of it once.
            shell(
                office,
                "pam",
                "echo pam > a.txt && git commit -qam 'pam edits a' && echo more >> b.txt && "
                f"printf '1\\n2\\n' > fresh.txt; echo END > {root}/pam-done",
            )
            wrote(root / "pam-done")
            shell(office, "jim", "echo jim > a.txt")
            for agent in ("jim", "pam", "michael"):
                wait_for(partial(warned, office, agent, "a.txt"), f"{agent} warned of a.txt")
            assert "jim" in warned(office, "pam", "a.txt")[0]

            stat = office.run("hive-office", "diff", "pam", "--stat")
            assert stat.returncode == 0, stat.stderr
            assert [" ".join(line.split()) for line in stat.stdout.splitlines()] == [
                "a.txt | +1 -1",
                "b.txt | +1 -0",
                "fresh.txt | +2 -0 (untracked)",
                "3 files changed, +4 -1",
            ]
            full = office.run("hive-office", "diff", "pam")
            assert full.returncode == 0, full.stderr
            assert "-a\n+pam" in full.stdout and "+more" in full.stdout
            assert "diff --git a/fresh.txt b/fresh.txt" in full.stdout and "+2" in full.stdout
            # Reading wrote nothing to pam's index.
            assert "?? fresh.txt" in git(Path(worktree), "status", "--porcelain")

            merged = office.run("hive-office", "merge", "pam", "--yes")
            assert merged.returncode == 0, merged.stderr
            assert f"merged {branch} (1 commit, 1 file) into main in {repo} on hive-remote" in (
                merged.stdout
            )
            assert "Not merged: 2 uncommitted files" in merged.stdout
            assert (repo / "a.txt").read_text() == "pam\n"
            assert (repo / "b.txt").read_text() == "b\n" and not (repo / "fresh.txt").exists()
            assert git(repo, "log", "-1", "--format=%s", "main") == "pam edits a"
            again = office.run("hive-office", "merge", "pam", "--yes")
            assert again.returncode == 0 and "nothing to merge" in again.stdout
            kept = office.run("hive-office", "worktree", "remove", "pam")
            assert kept.returncode == 1, kept.stdout
            assert "uncommitted work (b.txt, fresh.txt)" in kept.stderr
            assert Path(worktree, "fresh.txt").exists()

        # A folder missing on the host is said as such (the remote command's exit 97).
        spec = AgentSpec(id="pam", name="Pam", host=host.alias, ssh_args=host.ssh_args)
        with pytest.raises(NoFolder, match=f"the folder {root}/gone does not exist on hive-remote"):
            RemoteGit(spec, HivePaths(home))(["status"], f"{root}/gone")

    # The host is gone (its sshd stopped, pam's connection with it): a sentence, and the
    # overlap check leaves pam out rather than fail.
    refused = office.run("hive-office", "diff", "pam")
    assert refused.returncode == 1
    assert "cannot reach hive-remote" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    logged: list[tuple[str, str]] = []
    posted: list[tuple[str, Message]] = []
    keeper = WorktreeKeeper(
        office.paths,
        load_office(office.paths.office_toml),
        log=lambda agent, detail: logged.append((agent, detail)),
        report=lambda _component, _detail: None,
        post=lambda reader, message: posted.append((reader, message)),
    )
    assert keeper.check_overlaps() == {}
    assert [a for a, d in logged if "cannot reach hive-remote" in d] == ["pam"]


def test_a_host_down_at_the_start_is_a_link_down_never_a_start_in_the_checkout(
    root: Path, remote_home: list[Path]
) -> None:
    repo = make_repo(root / "remote-work")
    home = root / "office"
    with running_sshd(root / "sshd") as host:
        said = host.run("printf '%s' \"$HOME\"")
        key = plan.office_key(home)
        remote_home.append(Path(said.stdout) / REMOTE_ROOT / key)
        # sshd takes no new connection: the worktree cannot be made on the host (ssh
        # gives up after its ConnectTimeout), so pam is not started at all ...
        host.pause()
        with served(home, roster=roster(host, repo)) as office:
            wait_for(
                lambda: any("link to hive-remote down" in d for d in office.agent_log("pam")),
                "pam's start to find its host down",
                timeout=60,
            )
            # (The registry is written after the log line.)
            wait_for(
                lambda: office.registry()["pam"]["status"] == "disconnected",
                "pam to show disconnected",
            )
            assert not office.starts("pam") and read_record(office.paths, "pam") is None
            # ... and, the host back, the office's reconnect makes it and starts pam there.
            host.resume()
            wait_for(partial(running, office, "pam"), "pam to start once its host is back", 90)
            shell(office, "pam", f'echo "$PWD|END" > {root}/pwd')
            assert wrote(root / "pwd") == (
                f"{said.stdout}/{remote_worktree_relative(key, 'pam')}|END\n"
            )
