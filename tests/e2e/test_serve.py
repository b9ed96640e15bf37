"""`hive-office init` and `hive-office serve` as a person runs them (real subprocesses)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve_support import ServedOffice
from tests.support import wait_for

BIN = Path(sys.executable).parent


def run(
    *args: str, home: Path, agent: str | None = None, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["HIVE_HOME"] = str(home)
    if agent:
        env["HIVE_AGENT_ID"] = agent
    cmd = [str(BIN / args[0]), *args[1:]]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, input=input, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} -> {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def git(home: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(home / "hive"), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    run("hive-office", "init", home=home)
    return home


def test_init_creates_everything_and_commits(home: Path) -> None:
    hive = home / "hive"
    for name in [
        "PROTOCOL.md",
        "registry.json",
        "board.md",
        "tasks.json",
        "log.jsonl",
        ".gitignore",
    ]:
        assert (hive / name).is_file(), name
    for agent in ["michael", "jim", "pam", "pete"]:
        for sub in ["inbox/.done", "outbox/.sent", "outbox/.bad"]:
            assert (hive / "agents" / agent / sub).is_dir()
        assert (hive / "agents" / agent / "memory.md").is_file()
    assert (hive / "human" / "inbox").is_dir()
    assert (home / "run").stat().st_mode & 0o777 == 0o700
    assert "hive send" in (hive / "PROTOCOL.md").read_text()
    registry = json.loads((hive / "registry.json").read_text())
    assert [a["id"] for a in registry["agents"] if a["manager"]] == ["michael"]
    assert git(home, "log", "--format=%s") == "office: initialised\n"
    assert git(home, "status", "--porcelain") == ""


def test_init_again_overwrites_nothing(home: Path) -> None:
    (home / "hive" / "board.md").write_text("# my plan\n")
    toml = (home / "office.toml").read_text().replace('name = "Scranton"', 'name = "Stamford"')
    (home / "office.toml").write_text(toml)
    (home / "hive" / "agents" / "jim" / "memory.md").write_text("jim remembers\n")
    out = run("hive-office", "init", home=home).stdout
    assert "nothing to create" in out
    assert (home / "hive" / "board.md").read_text() == "# my plan\n"
    assert 'name = "Stamford"' in (home / "office.toml").read_text()
    assert (home / "hive" / "agents" / "jim" / "memory.md").read_text() == "jim remembers\n"


def test_init_refuses_a_bad_roster(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "office.toml").write_text('[[agents]]\nid = "human"\nname = "H"\n')
    result = run("hive-office", "init", home=home, check=False)
    assert result.returncode == 1
    assert "line 2" in result.stderr and "reserved" in result.stderr
    assert not (home / "hive").exists(), "nothing half-configured"


def test_bare_command_without_a_terminal_points_to_serve(tmp_path: Path) -> None:
    result = run("hive-office", home=tmp_path, check=False)
    assert (
        result.returncode == 2
        and "needs a terminal" in result.stderr
        and "hive-office serve" in result.stderr
    )


def test_demo_without_a_terminal_says_so(tmp_path: Path) -> None:
    result = run(
        "hive-office", "--demo", "--home", str(tmp_path / "demo"), home=tmp_path, check=False
    )
    assert result.returncode == 2 and "needs a terminal" in result.stderr
    assert not (tmp_path / "demo").exists(), "nothing laid out"


def test_serve_needs_an_office(tmp_path: Path) -> None:
    result = run("hive-office", "serve", "--no-agents", home=tmp_path / "none", check=False)
    assert result.returncode == 1 and "hive-office init" in result.stderr


def test_the_first_conversation(home: Path, tmp_path: Path) -> None:
    """The issue's 'done when': send, read, reply, read the reply, all of it in git log."""
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:
        run(
            "hive",
            "send",
            "--to",
            "michael",
            "--act",
            "request",
            "--subject",
            "deploy plan",
            "--body",
            "Can I deploy on Friday?",
            home=home,
            agent="jim",
        )
        wait_for(
            lambda: run("hive", "inbox", "--json", home=home, agent="michael").stdout != "[]\n",
            "delivery to michael",
        )
        [msg] = json.loads(run("hive", "inbox", "--json", home=home, agent="michael").stdout)
        assert (msg["from"], msg["subject"], msg["requires_reply"]) == ("jim", "deploy plan", True)
        run(
            "hive",
            "reply",
            msg["id"],
            "--act",
            "refuse",
            "--body",
            "Not on a Friday.",
            home=home,
            agent="michael",
        )
        run("hive", "done", msg["id"], home=home, agent="michael")
        wait_for(
            lambda: run("hive", "inbox", "--json", home=home, agent="jim").stdout != "[]\n",
            "the reply",
        )
        [reply] = json.loads(run("hive", "inbox", "--json", home=home, agent="jim").stdout)
        assert (reply["from"], reply["in_reply_to"], reply["hops"]) == ("michael", msg["id"], 1)
        assert reply["conversation"] == msg["conversation"]
    finally:
        assert office.stop() == 0
    history = git(home, "log", "--stat", "--format=%s")
    assert re.search(r"route: [12] messages?", history), history
    # Batching may fold delivery and `done` into one commit: the message is in the history
    # under inbox/ or inbox/.done/, and in the sender's outbox/.sent/.
    assert f"{msg['id']}.json" in git(home, "log", "--name-only", "--format=")
    assert f"agents/jim/outbox/.sent/{msg['id']}.json" in git(home, "ls-files")
    assert f"agents/jim/inbox/{reply['id']}.json" in git(home, "ls-files")
    assert f"agents/michael/inbox/.done/{msg['id']}.json" in git(home, "ls-files")
    assert git(home, "status", "--porcelain") == ""
    assert subprocess.run(["git", "-C", str(home / "hive"), "fsck", "--strict"]).returncode == 0


def test_mail_waits_in_outbox_until_the_office_starts(home: Path, tmp_path: Path) -> None:
    out = run("hive", "send", "--to", "pam", "--body", "hello", home=home, agent="jim")
    assert "not running" in out.stdout + out.stderr
    assert len(list((home / "hive/agents/jim/outbox").glob("*.json"))) == 1
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:
        wait_for(lambda: bool(list((home / "hive/agents/pam/inbox").glob("2*.json"))), "delivery")
    finally:
        assert office.stop() == 0


def test_second_office_on_the_same_home_is_refused(home: Path, tmp_path: Path) -> None:
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:
        second = run(
            "hive-office", "serve", "--no-agents", "--home", str(home), home=home, check=False
        )
        assert second.returncode == 1
        assert f"pid {office.process.pid}" in second.stderr and "already running" in second.stderr
    finally:
        assert office.stop() == 0


def test_sigterm_finishes_routing_and_commits(home: Path, tmp_path: Path) -> None:
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    outbox = home / "hive/agents/jim/outbox"
    # Hand-written files (no kick): the watcher or the shutdown scan must take them.
    for n in range(20):
        (outbox / f".tmp{n}").write_text(json.dumps({"to": "pam", "body": f"m{n}"}))
        os.rename(outbox / f".tmp{n}", outbox / f"m{n}.json")
    assert office.stop() == 0
    delivered = list((home / "hive/agents/pam/inbox").glob("2*.json"))
    assert len(delivered) == 20
    assert git(home, "status", "--porcelain") == ""
    assert not (home / "run" / "office.pid").exists()
    assert not (home / "run" / "kick.sock").exists()


def test_sigint_stops_cleanly_too(home: Path, tmp_path: Path) -> None:
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    office.process.send_signal(signal.SIGINT)
    assert office.process.wait(timeout=30) == 0


def test_the_persons_actions_on_a_headless_office(home: Path, tmp_path: Path) -> None:
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:

        def registry() -> dict[str, dict[str, object]]:
            return {
                a["id"]: a
                for a in json.loads((home / "hive" / "registry.json").read_text())["agents"]
            }

        assert "paused" in run("hive-office", "pause", "--home", str(home), "jim", home=home).stdout
        wait_for(lambda: registry()["jim"]["paused"] is True, "jim paused in the registry")
        run("hive-office", "resume", "--home", str(home), "jim", home=home)
        wait_for(lambda: registry()["jim"]["paused"] is False, "jim resumed")
        assert (
            "next hook" in run("hive-office", "halt", "--home", str(home), "jim", home=home).stdout
        )
        run("hive-office", "archive", "--home", str(home), "pete", home=home)
        wait_for(lambda: registry()["pete"]["status"] == "archived", "pete archived")
        # Mail to an archived agent goes to the manager instead.
        run("hive", "send", "--to", "pete", "--body", "look this up", home=home)
        wait_for(
            lambda: list((home / "hive/agents/michael/inbox").glob("*-bounce.json")), "the bounce"
        )
        typed = run("hive-office", "type", "--home", str(home), "jim", "hi", home=home, check=False)
        assert typed.returncode == 1 and "not running" in typed.stderr
        unknown = run("hive-office", "pause", "--home", str(home), "toby", home=home, check=False)
        assert unknown.returncode == 1 and "no agent 'toby'" in unknown.stderr
    finally:
        assert office.stop() == 0
    down = run("hive-office", "pause", "--home", str(home), "jim", home=home, check=False)
    assert down.returncode == 1 and "no office is running" in down.stderr
