"""Contained desks (issue 24): a real `hive-office serve` of shell desks, each attack
typed into a desk's own terminal, each refusal beside the desk's own way of doing the
allowed thing. The desk's processes run under the Landlock domain the office gave its
CLI (hive_core/desks/contain.py); what they write goes to the desk's private TMPDIR,
the one shared place a contained desk can write and this test can read.

An office with `contain = false` runs the same desks uncontained, and says so (`why`),
where the same writes go through: the refusals above are the containment's, not the
file modes'.
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

from hive_core.demo.scripted_model import bash, has_tool_result, turn, user_says
from hive_core.demo.scripted_model.responses import (
    call_outputs,
    has_call_output,
    input_says,
    shell,
)
from hive_core.desks import contain
from hive_core.hive import init_office
from hive_core.office import daemon
from hive_core.paths import HivePaths
from tests.claude_office import CLAUDE, make_claude_office, serving
from tests.codex_office import CODEX, make_codex_office, model_of, serving_codex
from tests.codex_office import DESK as CODEX_DESK
from tests.support import short_dir, wait_for
from tests.tmux_support import Tmux, row_text, tmux_env

BIN = Path(sys.executable).parent
SHELL = 'provider = "shell"\ncommand = ["bash", "--norc", "--noprofile", "-i"]\n'
DESKS = ("michael", "jim", "pam")
DENIED = "Permission denied"

pytestmark = pytest.mark.skipif(
    contain.unavailable(contain.abi()) is not None, reason="this kernel cannot contain a desk"
)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


class Done(NamedTuple):
    rc: int
    out: str


class Office:
    """A served office of shell desks in one repository (michael manages it from the
    repository itself; jim and pam get worktrees)."""

    def __init__(self, root: Path, *, contained: bool = True) -> None:
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
        self.paths.office_toml.write_text(
            f'[office]\nmanager = "michael"\ncontain = {"true" if contained else "false"}\n'
            + "".join(
                f'\n[[agents]]\nid = "{d}"\nname = "{d.title()}"\n{SHELL}cwd = "{self.repo}"\n'
                for d in DESKS
            )
        )
        init_office(self.paths)
        self.log = root / "serve.out"
        self._count = itertools.count()
        self.proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(self.paths.home)],
            env=self.env(),
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: all(self.pid(d) for d in DESKS), "the desks to start")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
        env["HIVE_HOME"] = str(self.paths.home)
        return env

    def pid(self, desk: str) -> int | None:
        try:
            data = json.loads(self.paths.registry.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        pid = {e["id"]: e for e in data["agents"]}.get(desk, {}).get("pid")
        return pid if isinstance(pid, int) else None

    def person(self, *args: str) -> Done:
        done = subprocess.run(
            [str(BIN / args[0]), *args[1:]],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Done(done.returncode, done.stdout + done.stderr)

    def in_desk(self, desk: str, command: str) -> Done:
        """`command` typed into `desk`'s terminal; its exit code and output, written to
        the desk's own TMPDIR (the office gives a contained desk one; an uncontained
        desk writes anywhere)."""
        n = next(self._count)
        tmp = self.paths.desk_tmp(desk)
        tmp.mkdir(parents=True, exist_ok=True)
        out, rc = tmp / f"{n}.out", tmp / f"{n}.rc"
        typed = self.person(
            "hive-office", "type", desk, f"{{ {command} ; }} >{out} 2>&1; echo $? >{rc}"
        )
        assert typed.rc == 0, typed.out
        wait_for(lambda: rc.exists() and rc.read_text().endswith("\n"), f"`{command}` in {desk}")
        return Done(int(rc.read_text()), out.read_text())

    def stop(self) -> None:
        if daemon.running_pid(self.paths) == self.proc.pid:
            daemon.stop(self.paths)
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def office() -> Iterator[Office]:
    with short_dir() as root:
        running = Office(root)
        try:
            yield running
        finally:
            running.stop()


def test_a_contained_desk_cannot_reach_other_desks_and_the_person(office: Office) -> None:
    paths = office.paths
    pam = paths.mailbox("pam")
    pam.notes.parent.mkdir(parents=True, exist_ok=True)
    pam.notes.write_text("pam's private note: the safe code is 4711\n")
    pam.memory.write_text("# pam\nthe safe code is 4711\n")
    attacks = {
        "another agent's inbox": f"echo '{{}}' > {pam.inbox}/forged.json",
        "the person's outbox": f"echo '{{}}' > {paths.mailbox('human').outbox}/forged.json",
        "another agent's worktree": f"echo evil > {paths.worktree('pam')}/evil.txt",
        "the manager's working folder (the person's checkout)": f"echo evil > {office.repo}/evil.txt",
        "another agent's notes": f"cat {pam.notes}",
        "another agent's memory.md": f"cat {pam.memory}",
        "the hive's git (every memory's history)": f"cat {paths.git_dir}/HEAD",
        "the office's home itself": f"echo x > {paths.home}/planted",
        "a git hook in the repository the office runs git in": (
            f"echo 'touch /tmp/pwned' > {office.repo}/.git/hooks/post-checkout"
        ),
        "the repository's shared config": f"echo '[core] fsmonitor=x' >> {office.repo}/.git/config",
        "the person's branch": f"echo 0 > {office.repo}/.git/refs/heads/main",
        "truncating another agent's notes": f"truncate -s 0 {pam.notes}",
        "a hard link to another agent's notes": f"ln {pam.notes} {paths.mailbox('jim').root}/n",
    }
    if os.geteuid() != 0:
        # Landlock's ptrace scope; a desk of root reads it still (docs/containment.md).
        attacks["another desk's environment (its HIVE_SECRET)"] = (
            f"cat /proc/{office.pid('pam')}/environ"
        )
    for what, command in attacks.items():
        done = office.in_desk("jim", command)
        assert done.rc != 0, f"{what}: {done.out}"
        assert DENIED in done.out or "Invalid cross-device link" in done.out, (what, done.out)
    assert not (pam.inbox / "forged.json").exists()
    assert not (paths.mailbox("human").outbox / "forged.json").exists()
    assert not (paths.worktree("pam") / "evil.txt").exists()
    assert not (office.repo / "evil.txt").exists()
    assert not (paths.home / "planted").exists()
    assert "4711" in pam.notes.read_text()
    # Listing is not reading: the names are there, the contents are not.
    listed = office.in_desk("jim", f"ls {pam.memory_dir}")
    assert listed.rc == 0 and "notes.md" in listed.out, listed.out


def test_a_contained_desk_does_its_own_work(office: Office) -> None:
    paths = office.paths
    jim = paths.mailbox("jim")
    jim.notes.parent.mkdir(parents=True, exist_ok=True)
    jim.notes.write_text("jim's note to self\n")
    work = office.in_desk(
        "jim",
        "echo 'jim works' > mine.txt && git add mine.txt && git -c user.name=Jim "
        "-c user.email=jim@example.com commit -qm 'jim: mine' && git log --format=%s -1",
    )
    assert work.rc == 0 and "jim: mine" in work.out, work.out
    assert (paths.worktree("jim") / "mine.txt").read_text() == "jim works\n"
    own = office.in_desk("jim", f"cat {jim.notes} {paths.board}")
    assert own.rc == 0 and "jim's note to self" in own.out and "# Board" in own.out, own.out
    tmp = office.in_desk("jim", 'mktemp && echo "$TMPDIR"')
    assert tmp.rc == 0 and str(paths.desk_tmp("jim")) in tmp.out, tmp.out
    sent = office.in_desk("jim", "hive send --to pam --subject 'from a contained desk' --body hi")
    assert sent.rc == 0, sent.out
    wait_for(
        lambda: any(
            json.loads(p.read_text()).get("subject") == "from a contained desk"
            for p in paths.mailbox("pam").inbox.glob("*.json")
        ),
        "jim's message in pam's inbox",
    )
    inbox = office.in_desk("pam", "hive inbox")
    assert inbox.rc == 0 and "from a contained desk" in inbox.out, inbox.out
    msg_id = next(
        p.stem
        for p in paths.mailbox("pam").inbox.glob("*.json")
        if json.loads(p.read_text()).get("subject") == "from a contained desk"
    )
    done = office.in_desk("pam", f"hive done {msg_id}")
    assert done.rc == 0, done.out
    assert (paths.mailbox("pam").done / f"{msg_id}.json").exists()


def test_a_contained_desk_keeps_and_searches_its_memory_through_the_office(
    office: Office,
) -> None:
    """memory.db holds every desk's private memory, so a contained desk can neither read
    nor write it: its `hive memory` verbs run in a process the office starts as the desk
    (remote/relay.py), with the scopes the store enforces for that desk."""
    paths = office.paths
    assert office.in_desk("jim", f"cat {paths.memory_db}").rc != 0
    noted = office.in_desk("jim", "hive memory note 'the staging box reboots at 02:00'")
    assert noted.rc == 0, noted.out
    assert "staging box" in paths.mailbox("jim").notes.read_text()
    found = office.in_desk("jim", "hive memory search 'staging box' --scope own --json")
    assert found.rc == 0, found.out
    [hit] = json.loads(found.out[found.out.index("[") :])
    assert hit["entry"]["owner"] == "jim" and "02:00" in hit["entry"]["text"]
    # The same verb as pam finds nothing of jim's: the office ran it as the desk that asked.
    theirs = office.in_desk("pam", "hive memory search 'staging box' --scope all")
    assert theirs.rc == 0 and "No matches." in theirs.out, theirs.out


# A client of `hive mcp` as an agent's CLI is one: JSON-RPC lines over the server's stdio.
MCP_CLIENT = """
import json, subprocess
server = subprocess.Popen(["hive", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def call(n, method, params):
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\\n")
    server.stdin.flush()
    return json.loads(server.stdout.readline())
call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "desk", "version": "1"}})
server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\\n")
wrote = call(2, "tools/call", {"name": "memory_write", "arguments": {"text": "mcp: ports 8000-8100 are ours"}})
print(json.dumps(wrote["result"]["structuredContent"]))
server.stdin.close()
server.wait(30)
"""


def test_a_contained_desks_mcp_server_writes_its_memory(office: Office) -> None:
    """The agent's CLI starts `hive mcp` in the desk, where memory cannot be written: the
    server runs in a process the office starts as the desk, over the same pipes."""
    client = office.paths.desk_tmp("jim") / "mcp_client.py"
    client.write_text(MCP_CLIENT)
    done = office.in_desk("jim", f"{sys.executable} {client}")
    assert done.rc == 0, done.out
    written = json.loads(done.out.strip().splitlines()[-1])
    assert written["id"], written
    assert "ports 8000-8100" in office.paths.mailbox("jim").notes.read_text()


def test_verbs_of_the_callers_own_process_reach_the_office_only_from_a_desk(
    office: Office,
) -> None:
    """The person's `hive memory` runs in the person's process; sent to the office as a
    contained desk sends it, it is refused with what to do, and nothing runs."""
    env = {**office.env(), "HIVE_CONTAINED": "1"}
    sent = subprocess.run(
        [str(BIN / "hive"), "memory", "search", "staging", "--scope", "office"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode != 0 and "unset HIVE_CONTAINED" in sent.stderr, sent
    own = office.person("hive", "memory", "search", "staging", "--scope", "office")
    assert own.rc == 0, own.out


# A hook frame as cth-hook sends it, to the office's hook socket: the reply line.
HOOK_CLIENT = """
import json, os, socket
frame = {"agent": os.environ["HIVE_AGENT_ID"], "secret": os.environ["HIVE_SECRET"],
         "event": {"hook_event_name": "SessionStart", "session_id": "s"}}
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["HIVE_SOCKET"])
s.sendall(json.dumps(frame).encode() + b"\\n")
print(s.makefile("rb").readline().decode().strip() or "no reply")
"""


def test_a_contained_desk_reaches_the_offices_sockets(office: Office) -> None:
    """Connecting to a pathname Unix socket is no file-system write to Landlock: the
    hook socket answers a contained desk's frame (the control socket answers every `hive`
    verb above: each asks the office who is calling)."""
    client = office.paths.desk_tmp("jim") / "hook_client.py"
    client.write_text(HOOK_CLIENT)
    hook = office.in_desk("jim", f"{sys.executable} {client}")
    assert hook.rc == 0 and json.loads(hook.out)["exit"] == 0, hook.out


def test_a_contained_desk_cannot_signal_the_office_or_other_desks(office: Office) -> None:
    pam = office.pid("pam")
    assert pam is not None
    for target in (pam, office.proc.pid):
        done = office.in_desk("jim", f"kill -STOP {target}")
        assert done.rc != 0 and "Operation not permitted" in done.out, done.out
    # Its own children it signals as before.
    own = office.in_desk("jim", "sleep 30 & kill $! && wait $!; echo code $?")
    assert "code 143" in own.out, own.out


def test_why_says_a_desk_is_contained(office: Office) -> None:
    why = office.person("hive-office", "why", "jim")
    assert why.rc == 0 and "uncontained" not in why.out, why.out


def test_an_office_that_contains_nothing_says_so_and_the_same_writes_go_through() -> None:
    with short_dir() as root:
        office = Office(root, contained=False)
        try:
            why = office.person("hive-office", "why", "jim")
            assert why.rc == 0, why.out
            assert "uncontained: office.toml says contain = false" in why.out, why.out
            pam = office.paths.mailbox("pam")
            done = office.in_desk("jim", f"echo '{{}}' > {pam.inbox}/forged.json")
            assert done.rc == 0 and (pam.inbox / "forged.json").exists(), done.out
        finally:
            office.stop()


# --- a real claude desk under containment ------------------------------------------------


@pytest.mark.integration
@pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)")
def test_a_contained_claude_desk_starts_its_hooks_reach_the_office_and_its_tools_are_held(
    short_tmp: Path,
) -> None:
    home = short_tmp / "home"
    paths = HivePaths(home)
    michael = paths.mailbox("michael")
    project = short_tmp / "project"
    calls = [
        bash(f"cat {michael.notes}"),
        # A path the office's tool policy cannot read from the command (a variable): the
        # policy would refuse the plain write first, and this is about the kernel.
        bash(f"D={michael.root}; echo '{{}}' > $D/inbox/forged.json"),
        bash(f"echo mine > {project}/jim.txt && cat {paths.mailbox('jim').notes}"),
    ]
    office = make_claude_office(
        short_tmp,
        {"jim": [turn(user_says("try the walls"), *calls), turn(has_tool_result(), "Noted.")]},
        # The person lets jim's CLI run any command without asking: the walls are the
        # kernel's, not Claude Code's permission prompts.
        options={"jim": 'command = ["claude", "--allowedTools=Bash"]\n'},
    )
    michael.notes.parent.mkdir(parents=True, exist_ok=True)
    michael.notes.write_text("michael's private note: 4711\n")
    jim_notes = paths.mailbox("jim").notes
    jim_notes.parent.mkdir(parents=True, exist_ok=True)
    jim_notes.write_text("jim's own note\n")
    # serving() returns once both CLIs started under containment and their SessionStart
    # hook reached the office.
    with serving(office, short_tmp / "serve.log"):
        why = office.run("hive-office", "why", "--home", str(home), "jim")
        assert "uncontained" not in why.stdout, why.stdout
        office.run("hive-office", "type", "--home", str(home), "jim", "try the walls")
        after = office.models["jim"].wait_for(lambda r: r.turn == 1, 90)
        results = {
            block["tool_use_id"]: json.dumps(block["content"])
            for message in after.body["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        }
        read, write, own = (results[call.id] for call in calls)
        assert f"{michael.notes}: {DENIED}" in read and "4711" not in read, read
        assert f"inbox/forged.json: {DENIED}" in write, write
        assert "jim's own note" in own, own
        assert not (michael.inbox / "forged.json").exists()
        assert (project / "jim.txt").read_text() == "mine\n"
        # Each tool call's PreToolUse hook (cth-hook, a child of the contained CLI)
        # reached the office and was answered.
        hooked = [e["detail"] for e in office.log("jim") if "Bash: " in e.get("detail", "")]
        assert len(hooked) >= len(calls), hooked


# --- on screen ---------------------------------------------------------------------------


def test_the_screen_marks_the_uncontained_desk_and_why_says_why(short_tmp: Path) -> None:
    """The app in a real tmux, an office of two shell desks: Alpha works in a folder of
    its own (contained), Beta in the folder that holds the office's home (it cannot be
    contained). Beta's map label carries `○` and its pane title says `uncontained`;
    Alpha's do not; `hive-office why` says why."""
    env = tmux_env(short_tmp)
    env["PATH"] = f"{BIN}:{env['PATH']}"
    tmux = Tmux(short_tmp, env)
    home = short_tmp / "office"
    home.mkdir()
    work = short_tmp / "work"
    work.mkdir()
    desks = (("a0", "Alpha", work), ("a1", "Beta", short_tmp))
    (home / "office.toml").write_text(
        '[office]\nmanager = "a0"\n'
        + "".join(
            f'\n[[agents]]\nid = "{a}"\nname = "{name}"\nprovider = "shell"\ncwd = "{cwd}"\n'
            'command = ["bash", "--norc", "--noprofile", "-i"]\n'
            for a, name, cwd in desks
        )
    )
    init_office(HivePaths(home))
    app = [str(BIN / "hive-office"), "--home", str(home)]
    tmux("new-session", "-d", "-s", "office", "-x", "160", "-y", "48", *app)
    try:

        def screen() -> list[str]:
            return [row_text(r) for r in tmux.capture("office")]

        def title(name: str) -> str | None:
            return next((r for r in screen() if f" 2 {name} " in r or f" 1 {name} " in r), None)

        def focused(number: str, name: str) -> str | None:
            # As a person would: the prefix key and the desk's number, pressed again
            # while the pane is not shown (keys sent before the app took them are lost).
            shown = title(name)
            if shown and "running" in shown:
                return shown
            tmux.keys("office", "C-]", number)
            return None

        # Beta's pane: focused with the prefix key and its number.
        wait_for(lambda: title("Alpha"), "Alpha's pane")
        beta = wait_for(lambda: focused("2", "Beta"), "Beta's pane")
        assert "uncontained" in beta, beta
        rows = wait_for(
            lambda: (s := screen()) and any("Beta ○" in r for r in s) and s, "Beta's mark"
        )
        assert not any("Alpha ○" in r for r in rows), "\n".join(rows)
        alpha = wait_for(lambda: focused("1", "Alpha"), "Alpha's pane")
        assert "uncontained" not in alpha, alpha
        why = subprocess.run(
            [str(BIN / "hive-office"), "why", "--home", str(home), "a1"],
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        assert f"uncontained: its folder {short_tmp} holds {home}" in why, why
    finally:
        subprocess.run(
            [str(BIN / "hive-office"), "stop", "--home", str(home)], capture_output=True, env=env
        )
        tmux.kill()


# --- a real codex desk under containment -------------------------------------------------

# What make_codex_office gives the desk's command so Codex runs unsandboxed in a container;
# taken out below, so the office's own switch (contain.CONTAINED_OPTIONS) is what counts.
CODEX_SANDBOX_OFF = ', "-c", "sandbox_mode=\\"danger-full-access\\""'


@pytest.mark.integration
@pytest.mark.skipif(CODEX is None, reason="codex CLI not found (run scripts/setup)")
def test_a_contained_codex_desk_runs_its_commands_inside_the_offices_walls(
    short_tmp: Path,
) -> None:
    """Codex's own sandbox (bubblewrap) cannot start inside a Landlock domain, which
    refuses mounts: the office turns it off for a contained desk, and its domain holds
    Codex's commands instead."""
    home = short_tmp / "home"
    paths = HivePaths(home)
    michael = paths.mailbox("michael")
    project = short_tmp / "project"
    calls = [
        shell(f"cat {michael.notes}"),
        shell(f"D={michael.root}; echo '{{}}' > $D/inbox/forged.json"),
        shell(f"echo mine > {project}/dwight.txt && echo wrote-ok"),
    ]
    office = make_codex_office(
        short_tmp, [turn(input_says("try the walls"), *calls), turn(has_call_output(), "Noted.")]
    )
    try:
        roster = paths.office_toml.read_text()
        assert CODEX_SANDBOX_OFF in roster
        paths.office_toml.write_text(roster.replace(CODEX_SANDBOX_OFF, ""))
        michael.notes.parent.mkdir(parents=True, exist_ok=True)
        michael.notes.write_text("michael's private note: 4711\n")
        with serving_codex(office, short_tmp / "serve.log"):
            why = office.run("hive-office", "why", "--home", str(home), CODEX_DESK).stdout
            assert "uncontained" not in why, why
            office.run("hive-office", "type", "--home", str(home), CODEX_DESK, "try the walls")
            answered = model_of(office).wait_for(lambda r: r.turn == 1, 90)
            read, write, own = call_outputs(answered.body)
            # Each refusal is the kernel's, to the command itself (Codex ran it).
            assert f"{michael.notes}: {DENIED}" in read and "4711" not in read, read
            assert f"inbox/forged.json: {DENIED}" in write, write
            assert "wrote-ok" in own, own
        assert not (michael.inbox / "forged.json").exists()
        assert (project / "dwight.txt").read_text() == "mine\n"
    finally:
        office.close()
