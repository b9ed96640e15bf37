"""A claude desk on "another machine": the real claude CLI on the host of a private sshd on
127.0.0.1, inside `ssh -tt` from a real `hive-office serve`, against a scripted Messages
API. Its hooks reach the office through the forwarded hook socket (the Stop drain hands
it mail that arrived mid-turn), its `hive` verbs through the forwarded control socket
(no hive files on the host), and a dropped connection is reconnected with its session
resumed and the mail sent meanwhile delivered once.

The host is this machine: what the roster names in the claude config folder and the
project is the same path there. The host's environment is not the office's, so the
roster gives the remote desk what claude needs there (its config folder and key), as a
person's office.toml would.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.demo.scripted_model import bash, has_tool_result, turn, user_says
from tests.claude_office import API_KEY, BIN, CLAUDE, ClaudeOffice, make_claude_office
from tests.sshd_support import SshHost, forget_on_host, running_sshd
from tests.support import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]


@pytest.fixture
def host(short_tmp: Path) -> Iterator[SshHost]:
    with running_sshd(short_tmp / "sshd") as h:
        yield h
    forget_on_host(short_tmp / "home")


def remote_jim(office: ClaudeOffice, host: SshHost) -> None:
    """Put jim on the host: host, ssh_args, and the claude environment it needs there."""
    toml = office.home / "office.toml"
    text = toml.read_text().replace("[office]\n", f'[office]\nremote_venv = "{sys.prefix}"\n')
    head, jim = text.split('id = "jim"')
    base_url = office.models["jim"].base_url
    jim = jim.replace(
        f'env = {{ ANTHROPIC_BASE_URL = "{base_url}" }}',
        f'env = {{ ANTHROPIC_BASE_URL = "{base_url}", ANTHROPIC_API_KEY = "{API_KEY}", '
        f'CLAUDE_CONFIG_DIR = "{office.env["CLAUDE_CONFIG_DIR"]}", DISABLE_TELEMETRY = "1", '
        'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" }\n'
        f'host = "{host.alias}"\nssh_args = {json.dumps(host.ssh_args)}',
    )
    toml.write_text(head + 'id = "jim"' + jim)


def test_a_claude_desk_on_another_host_drains_mail_at_stop_and_survives_a_drop(
    short_tmp: Path, host: SshHost
) -> None:
    mail: dict[str, str] = {}
    office = make_claude_office(
        short_tmp,
        {
            "jim": [
                turn(user_says("start the build"), bash("hive roster"), delay=3.0),
                turn(has_tool_result(), "Build started."),
                # The Stop hook (through the forwarded socket) hands over the mail.
                turn(user_says("Stop hook feedback"), bash("hive inbox")),
                turn(
                    has_tool_result(),
                    build=lambda req: [
                        bash(f"hive reply {mail['first']} --body 'Build is green.'")
                    ],
                ),
                turn(has_tool_result(), build=lambda req: [bash(f"hive done {mail['first']}")]),
                turn(has_tool_result(), "Answered Michael."),
                # After the drop: the office's nudge for the mail that waited.
                turn(
                    user_says("You have"), build=lambda req: [bash(f"hive read {mail['second']}")]
                ),
                turn(has_tool_result(), build=lambda req: [bash(f"hive done {mail['second']}")]),
                turn(has_tool_result(), "Read it."),
            ]
        },
    )
    remote_jim(office, host)
    proc = subprocess.Popen(
        [str(BIN / "hive-office"), "serve", "--home", str(office.home)],
        env=office.env,
        stdout=(short_tmp / "serve.log").open("wb"),
        stderr=subprocess.STDOUT,
    )

    def entry(agent: str) -> dict[str, object]:
        return office.registry().get(agent, {})

    try:
        wait_for(
            lambda: entry("jim").get("status") not in (None, "offline"),
            "jim's desk to start",
            timeout=30,
        )
        wait_for(
            lambda: all(
                entry(a).get("session_id") and entry(a)["status"] == "idle" for a in office.models
            ),
            "both sessions (jim's SessionStart came through the forwarded hook socket)",
            timeout=90,
        )
        session = entry("jim")["session_id"]
        # jim's process here is ssh; claude runs on the host with no HIVE_HOME.
        argv0 = Path(f"/proc/{entry('jim')['pid']}/cmdline").read_bytes().split(b"\0")[0]
        assert argv0.endswith(b"/ssh"), argv0

        office.run("hive-office", "type", "--home", str(office.home), "jim", "start the build")
        wait_for(lambda: entry("jim")["status"] == "working", "jim working (UserPromptSubmit)", 30)
        office.post_as("michael", "jim", "build status?", "Is the build green?", act="query")
        [first] = wait_for(lambda: office.inbox("jim"), "delivery to jim")
        mail["first"] = first["id"]
        reply = wait_for(
            lambda: [m for m in office.inbox("michael") if m.get("in_reply_to") == first["id"]],
            "jim's reply, sent by `hive reply` on the host",
            timeout=60,
        )[0]
        assert reply["from"] == "jim" and reply["body"] == "Build is green."
        wait_for(lambda: not office.inbox("jim"), "jim's `hive done` on the host", timeout=60)
        wait_for(lambda: entry("jim")["status"] == "idle", "jim idle", timeout=30)

        # The link drops and the host stays away for a while: disconnected, with why.
        host.pause()
        host.drop()
        wait_for(lambda: entry("jim")["status"] == "disconnected", "jim disconnected", timeout=30)
        office.post_as("michael", "jim", "while you were away", "b")
        [second] = wait_for(lambda: office.inbox("jim"), "the mail waiting for jim")
        mail["second"] = second["id"]
        host.resume()
        # Reconnected: the same claude session, resumed; the waiting mail read once.
        wait_for(lambda: not office.inbox("jim"), "jim to read the waiting mail", timeout=120)
        assert entry("jim")["session_id"] == session
        model = office.models["jim"]
        wait_for(lambda: model.scenario.done, "jim's last turn", timeout=60)
        # Delivered once: one nudge for it, one copy in jim's done folder, none left.
        details = [str(e.get("detail")) for e in office.log("jim")]
        assert len([d for d in details if d.startswith("nudged:")]) == 1, details
        done = office.home / "hive" / "agents" / "jim" / "inbox" / ".done"
        assert len(list(done.glob(f"{second['id']}*"))) == 1 and not office.inbox("jim")
        nudges = [
            line["detail"]
            for line in office.log("jim")
            if "link to hive-remote" in str(line.get("detail"))
        ]
        assert any("down" in n for n in nudges) and any("back" in n for n in nudges), nudges

        # Its cost: the office reads a remote desk's transcripts on its host, over ssh
        # (never from this disk, where a real host's files would not be).
        def jim_tokens() -> int:
            out = office.run("hive-office", "cost", "--home", str(office.home), "--json")
            rows = json.loads(out.stdout)["rows"]
            return sum(rows.get("jim", {}).get("tokens", {}).values())

        assert wait_for(jim_tokens, "jim's tokens in hive-office cost", timeout=60) > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        office.close()
