"""Shell desks on "another machine": a real `hive-office serve`, a real sshd on 127.0.0.1.

pam and jim run on the host `hive-remote` (office.toml's host + ssh_args): their bash runs
inside `ssh -tt` from the office's pty, their hook and control sockets are forwarded by
that connection. The host is this machine under a private sshd, so the test reads what
the remote shells wrote straight from the disk; nothing on the remote side is given the
office's home (HIVE_HOME is unset there, the cwd is no office).
"""

from __future__ import annotations

import json
import shlex
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.mail import message_names
from hive_core.remote import plan
from tests.cmdline_support import argv_holding
from tests.serve_support import ServedOffice, served
from tests.sshd_support import SshHost, forget_on_host, running_sshd
from tests.support import wait_for

DESK = """
[[agents]]
id = "{id}"
name = "{name}"
provider = "shell"
host = "{host}"
ssh_args = {ssh_args}
cwd = "{cwd}"
command = ["bash", "--norc", "--noprofile", "-i"]
env = {{ DESK_TOKEN = "{token}-{id}" }}
"""
# A value only the roster's env holds (the host's CLI must see it; no argv may).
TOKEN = f"roster-env-{uuid.uuid4().hex}"


def roster(host: SshHost, work: Path) -> str:
    desks = "".join(
        DESK.format(
            id=i,
            name=i.title(),
            host=host.alias,
            ssh_args=json.dumps(host.ssh_args),
            cwd=work,
            token=TOKEN,
        )
        for i in ("pam", "jim")
    )
    # The host's venv is this one: `hive` and `cth-hook` are installed there.
    return (
        f'[office]\nmanager = "michael"\nremote_venv = "{sys.prefix}"\n\n'
        '[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\n'
        'command = ["bash", "--norc", "--noprofile", "-i"]\n' + desks
    )


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SshHost]:
    with running_sshd(tmp_path / "sshd") as h:
        yield h
    forget_on_host(tmp_path / "office")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "remote-work"
    folder.mkdir()
    return folder


def status(office: ServedOffice, agent: str) -> str:
    return str(office.registry().get(agent, {}).get("status"))


def shell(office: ServedOffice, agent: str, line: str) -> None:
    done = office.run("hive-office", "type", "--home", str(office.home), agent, line)
    assert done.returncode == 0, done.stderr


def wrote(path: Path) -> str:
    """What a remote shell wrote into `path`, once it is complete (the line ends in END)."""
    return wait_for(
        lambda: path.exists() and path.read_text().endswith("END\n") and path.read_text(),
        f"the remote shell to write {path.name}",
    )


def unread(office: ServedOffice, agent: str, sender: str | None = None) -> list[dict[str, str]]:
    """The messages in `agent`'s inbox (from `sender` only, if given), oldest first."""
    inbox = office.paths.mailbox(agent).inbox
    found = [json.loads((inbox / n).read_text()) for n in message_names(inbox)]
    return [m for m in found if sender is None or m["from"] == sender]


def running(office: ServedOffice, agent: str, starts: int = 1) -> bool:
    return len(office.starts(agent)) >= starts and status(office, agent) in ("running", "idle")


def test_a_shell_desk_on_another_host_sends_reads_and_proves_who_it_is(
    tmp_path: Path, host: SshHost, work: Path
) -> None:
    with served(tmp_path / "office", roster=roster(host, work)) as office:
        wait_for(lambda: running(office, "pam") and running(office, "jim"), "both remote desks")
        # The remote side has no hive files: no HIVE_HOME, a cwd that is no office; its
        # sockets are the forwarded ones in its private folder under the host's $HOME.
        shell(
            office, "pam", 'echo "$HIVE_REMOTE|${HIVE_HOME-unset}|$HIVE_SOCKET|$PWD|END" > env.txt'
        )
        remote, home, sock, cwd, _ = wrote(work / "env.txt").strip().split("|")
        rdir = plan.rdir_of(str(Path.home()), plan.office_key(office.home), "pam")
        assert (remote, home, sock, cwd) == ("1", "unset", f"{rdir}/hook.sock", str(work))
        assert not (work / ".hive").exists() and not (work / "office.toml").exists()
        # The roster's env and the start's secret reach the CLI there ...
        shell(office, "pam", 'printf "%s|%s|END\\n" "$DESK_TOKEN" "$HIVE_SECRET" > values.txt')
        token, secret, _ = wrote(work / "values.txt").strip().split("|")
        assert token == f"{TOKEN}-pam" and len(secret) >= 32
        # ... through the launch script prepare kept, gone once read, while no process's
        # argv on either end (the local ssh, the host's shell, the CLI) holds them: `ps`
        # shows every user the desk's command, which names only that script.
        assert not Path(rdir, plan.LAUNCH_FILE).exists()
        assert argv_holding(f"{rdir}/{plan.LAUNCH_FILE}"), "the desk's command is not in ps"
        for value in (token, secret, f"{TOKEN}-jim"):
            assert argv_holding(value) == []

        # Mail both ways: pam's `hive send` lands in michael's inbox, from pam.
        shell(
            office,
            "pam",
            "hive send --to michael --subject 'from the host' --body hi > sent.txt 2>&1; echo END >> sent.txt",
        )
        said = wrote(work / "sent.txt")
        mine = wait_for(lambda: unread(office, "michael", "pam"), f"pam's mail to michael: {said}")
        assert [m["subject"] for m in mine] == ["from the host"]

        sent = office.run("hive", "send", "--to", "pam", "--subject", "to the host", "--body", "b")
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: unread(office, "pam"), "the person's mail in pam's inbox")
        shell(office, "pam", "hive inbox > inbox.txt 2>&1; echo END >> inbox.txt")
        assert "to the host" in wrote(work / "inbox.txt")

        # Identity: pam's shell using jim's forwarded socket is refused (the office knows
        # which desk's socket a connection came through; pam's secret is not jim's) ...
        jims = plan.rdir_of(str(Path.home()), plan.office_key(office.home), "jim")
        shell(
            office,
            "pam",
            f"HIVE_CONTROL={shlex.quote(jims)}/control.sock hive send --to michael "
            '--subject borrowed --body x > borrowed.txt 2>&1; echo "exit $? END" >> borrowed.txt',
        )
        borrowed = wrote(work / "borrowed.txt")
        assert "exit 1" in borrowed and "cannot act as pam" in borrowed, borrowed
        # ... while jim's own shell on the same socket is let through.
        shell(
            office,
            "jim",
            "hive send --to michael --subject 'jim here' --body y > jim.txt 2>&1; echo END >> jim.txt",
        )
        said = wrote(work / "jim.txt")
        jim = wait_for(lambda: unread(office, "michael", "jim"), f"jim's mail: {said}")
        assert [m["subject"] for m in jim] == ["jim here"]
        assert [m["subject"] for m in unread(office, "michael", "pam")] == ["from the host"]

        # Leases name files on the host, from the desk's cwd there: pam holds shared.txt,
        # jim (same host, same folder) is refused it, and sees who holds it.
        shell(
            office, "pam", 'hive lease shared.txt > lease.txt 2>&1; echo "exit $? END" >> lease.txt'
        )
        assert f"leased hive-remote:{work}/shared.txt" in wrote(work / "lease.txt")
        shell(
            office,
            "jim",
            'hive lease shared.txt > lease2.txt 2>&1; echo "exit $? END" >> lease2.txt',
        )
        refused = wrote(work / "lease2.txt")
        assert "exit 1" in refused and "pam" in refused, refused


def test_a_dropped_link_shows_disconnected_reconnects_and_loses_no_mail(
    tmp_path: Path, host: SshHost, work: Path
) -> None:
    with served(tmp_path / "office", roster=roster(host, work)) as office:
        wait_for(lambda: running(office, "pam"), "pam's remote desk")
        first = office.registry()["pam"]["pid"]
        # The shell answers through the link: it is up (not still logging in).
        shell(office, "pam", "echo up END > up.txt")
        wrote(work / "up.txt")
        # sshd is stopped from taking new connections for a while: the first reconnect
        # fails too, so the desk is seen disconnected with its reason.
        host.pause()
        host.drop()
        wait_for(lambda: status(office, "pam") == "disconnected", "pam to show disconnected")
        why = office.registry()["pam"]["why"] or ""
        # ssh's own words about the drop, and what the office does next.
        assert "closed by remote host" in why and "reconnect" in why, why
        # Mail sent while the link is down waits in pam's inbox ...
        sent = office.run("hive", "send", "--to", "pam", "--subject", "while down", "--body", "x")
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: unread(office, "pam"), "the mail to wait in pam's inbox")
        host.resume()
        # ... the office reconnects by itself (a new ssh, so a new pid) ...
        wait_for(lambda: running(office, "pam", starts=2), "pam to reconnect", timeout=90)
        assert office.registry()["pam"]["pid"] != first
        assert any("link to hive-remote down" in line for line in office.agent_log("pam"))
        # ... and the mail is there once.
        shell(office, "pam", "hive inbox > inbox.txt 2>&1; echo END >> inbox.txt")
        listing = wrote(work / "inbox.txt")
        assert listing.count("while down") == 1, listing


def test_a_host_that_stays_down_is_told_to_the_manager_once(
    tmp_path: Path, host: SshHost, work: Path
) -> None:
    # pam's host refuses every connection (nothing listens on port 1): it never starts.
    down = roster(host, work).replace(
        f"ssh_args = {json.dumps(host.ssh_args)}",
        f"ssh_args = {json.dumps([*host.ssh_args, '-p', '1'])}",
        1,
    )
    with served(tmp_path / "office", roster=down) as office:

        def drops() -> list[str]:
            return [d for d in office.agent_log("pam") if d.startswith("link to hive-remote down")]

        # Attempts 1, 2 and 3 (1 s, then 2 s apart): the manager hears of it ...
        told = wait_for(
            lambda: [
                m for m in unread(office, "michael", "router") if "unreachable" in m["subject"]
            ],
            "the manager's notice",
        )
        assert told[0]["subject"] == "hive-remote is unreachable"
        assert "pam" in told[0]["body"] and "Connection refused" in told[0]["body"]
        assert status(office, "pam") == "disconnected" and not office.starts("pam")
        # ... once: the fourth failure (4 s later) tells nobody again.
        wait_for(lambda: len(drops()) >= 4, "a fourth attempt")
        notices = [m for m in unread(office, "michael", "router") if "unreachable" in m["subject"]]
        assert len(notices) == 1, notices
        why = office.run("hive-office", "why", "--home", str(office.home), "pam")
        assert "Connection refused" in why.stdout and "reconnect" in why.stdout, why.stdout


def test_a_desk_on_another_host_can_be_hired_into_the_running_office(
    tmp_path: Path, host: SshHost, work: Path
) -> None:
    with served(tmp_path / "office", roster=roster(host, work)) as office:
        wait_for(lambda: running(office, "pam"), "pam's remote desk")
        hired = office.run(
            "hive-office", "hire", "--home", str(office.home), "dwight", "--name", "Dwight",
            "--provider", "shell", "--host", host.alias,
            *(f"--ssh-arg={a}" for a in host.ssh_args), "--cwd", str(work),
        )  # fmt: skip
        assert hired.returncode == 0, hired.stderr
        toml = office.paths.office_toml.read_text()
        assert f'host = "{host.alias}"' in toml and json.dumps(host.ssh_args[1]) in toml
        wait_for(lambda: running(office, "dwight"), "the hired desk on its host")
        # Its own forwarded sockets are up: it sends as itself.
        shell(
            office, "dwight", "hive send --to michael --subject hired --body hi; echo END > d.txt"
        )
        wrote(work / "d.txt")
        mail = wait_for(lambda: unread(office, "michael", "dwight"), "dwight's mail")
        assert [m["subject"] for m in mail] == ["hired"]
    # A host ssh would read as an option is refused before office.toml is touched.
    bad = office.run(
        "hive-office", "hire", "--home", str(office.home), "kevin", "--name", "Kevin",
        "--provider", "shell", "--host", "-oProxyCommand=x",
    )  # fmt: skip
    assert bad.returncode != 0 and "not starting with '-'" in (bad.stderr + bad.stdout)
    assert "kevin" not in office.paths.office_toml.read_text()
