"""A codex desk and a gemini desk on "another machine": each vendor's pinned CLI on the
host of a private sshd on 127.0.0.1, inside `ssh -tt` from a real `hive-office serve`,
against the scripted API of its vendor on 127.0.0.1 (tests/codex_office.py,
tests/gemini_office.py). What a person relies on, for each:

- the desk runs on the host, and its own hook events reach the office over the link
  (SessionStart in the registry, the status going working and back to idle);
- mail to it wakes it once, and the model's `hive send --to michael`, run by the CLI
  through the host's thin `hive`, lands in michael's inbox once, from the desk;
- a tool the office refuses (a network command for a non-web agent) is refused with the
  office's reason, which the model reads, while the calls beside it run.

The host is this machine, so the roster's paths (the project, the scripted API's
address) are the same there; its environment is not the office's: the roster's `env`
carries the key, as a person's office.toml would. The key reaches the CLI (the scripted
API sees it), while no process's argv on either end holds it, nor the text of a file
shipped to the host (Codex's auth.json holds the key): `ps` shows argv to every user.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive_core.demo.scripted_model import Turn, turn
from hive_core.demo.scripted_model import gemini as gemini_api
from hive_core.demo.scripted_model import responses as codex_api
from hive_core.remote import plan
from tests import codex_office, gemini_office
from tests.cmdline_support import argv_holding
from tests.codex_office import CODEX, DESK, make_codex_office, model_of, serving_codex
from tests.gemini_office import GEMINI, make_gemini_floor
from tests.sshd_support import SshHost, forget_on_host, running_sshd
from tests.support import wait_for

pytestmark = pytest.mark.integration

MAIL = "Ping from the person"
SUBJECT = "From the host"
SEND = f"hive send --to michael --subject '{SUBJECT}' --body 'Sent on the remote host.'"
# Never reached: the office refuses it before the CLI runs it.
NETWORK = "curl -s http://127.0.0.1:9/"
REFUSED = "`curl` reaches the network, and you are not a research agent"
NUDGE = "Run hive inbox"


@pytest.fixture
def host(short_tmp: Path) -> Iterator[SshHost]:
    with running_sshd(short_tmp / "sshd") as h:
        yield h
    forget_on_host(short_tmp / "home")


def on_host(host: SshHost) -> tuple[str, str]:
    """(office options, desk options): the desk on `host`, the office's venv there."""
    return (
        f'remote_venv = "{sys.prefix}"\n',
        f'host = "{host.alias}"\nssh_args = {json.dumps(host.ssh_args)}\n',
    )


def runs_over_ssh(entry: dict[str, Any]) -> bool:
    """The desk's process here is ssh: its CLI runs on the host."""
    argv0 = Path(f"/proc/{entry['pid']}/cmdline").read_bytes().split(b"\0")[0]
    return argv0.endswith(b"/ssh")


def shipped_texts(home: Path, desk: str) -> list[str]:
    """The text of each file the office shipped to the desk's folder on the host (this
    machine): those there with a file at the same place under the office home (the CLI
    writes files of its own there too). The desk's command, naming its launch script
    (gone once read), must be in `ps` now, or finding no value there proves nothing."""
    rdir = Path(plan.rdir_of(str(Path.home()), plan.office_key(home), desk))
    assert argv_holding(f"{rdir}/{plan.LAUNCH_FILE}"), "the desk's command is not in ps"
    assert not (rdir / plan.LAUNCH_FILE).exists()
    there = sorted(f for f in (rdir / "files").rglob("*") if f.is_file())
    here = [home / f.relative_to(rdir / "files") for f in there]
    return [f.read_text() for f in here if f.is_file()]


def in_argv(values: list[str]) -> dict[str, list[str]]:
    """The processes of this user whose argv holds one of `values` (a whole file's text,
    a key), by the value's start."""
    found = {value[:60]: argv_holding(value) for value in values if len(value) >= 16}
    return {value: argv for value, argv in found.items() if argv}


def the_message_sent(inbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in inbox if m["subject"] == SUBJECT]


@pytest.mark.skipif(CODEX is None, reason="codex CLI not found (run scripts/setup)")
def test_a_codex_desk_on_another_host_is_woken_sends_mail_and_meets_the_policy(
    short_tmp: Path, host: SshHost
) -> None:
    mail: dict[str, str] = {}
    turns: list[Turn] = [
        turn(
            codex_api.input_says(NUDGE),
            build=lambda req: [
                codex_api.shell(SEND),
                codex_api.shell(NETWORK),
                codex_api.shell(f"hive done {mail['id']}"),
            ],
            # Long enough to see the desk working (UserPromptSubmit came over the link).
            delay=3.0,
        ),
        turn(codex_api.has_call_output(), "Sent."),
    ]
    office_options, options = on_host(host)
    office = make_codex_office(short_tmp, turns, options=options, office_options=office_options)
    model = model_of(office)

    def dwight() -> dict[str, Any]:
        return office.registry().get(DESK, {})

    try:
        # Returns once SessionStart and the first turn's Stop came from the host.
        with serving_codex(office, short_tmp / "serve.log"):
            assert runs_over_ssh(dwight())
            texts = shipped_texts(office.home, DESK)
            assert any(codex_office.API_KEY in t for t in texts), "no auth.json was shipped"
            assert in_argv([codex_office.API_KEY, *texts]) == {}
            office.run("hive", "send", "--to", DESK, "--subject", MAIL, "--body", "Tell Michael.")
            [delivered] = wait_for(lambda: office.inbox(DESK), "delivery to dwight")
            mail["id"] = delivered["id"]
            wait_for(lambda: dwight()["status"] == "working", "dwight woken (UserPromptSubmit)")
            answered = model.wait_for(lambda r: r.turn == 1, 90)
            wait_for(lambda: dwight()["status"] == "idle", "dwight idle again (Stop)")
            wait_for(lambda: not office.inbox(DESK), "dwight's `hive done` on the host")
            [sent] = wait_for(
                lambda: the_message_sent(office.inbox("michael")), "dwight's mail to michael"
            )
            details = [str(e.get("detail")) for e in office.log(DESK)]
    finally:
        office.close()

    assert sent["from"] == DESK and sent["body"] == "Sent on the remote host."
    assert len(the_message_sent(office.inbox("michael"))) == 1
    # The key reached the CLI on the host, out of any argv.
    keys = {r.headers.get("authorization") for r in model.main_requests}
    assert keys == {f"Bearer {codex_office.API_KEY}"}, keys
    woken = [
        r for r in model.main_requests if NUDGE in "\n".join(codex_api.last_input_texts(r.body))
    ]
    assert len(woken) == 1, [codex_api.last_input_texts(r.body) for r in woken]
    # UserPromptSubmit's answer came back over the link: the mail, listed for the model.
    assert MAIL in "\n".join(codex_api.last_input_texts(woken[0].body))
    assert sum(d.startswith("nudged:") for d in details) == 1, details
    assert any("UserPromptSubmit" in d and "[idle -> working]" in d for d in details), details
    assert any(d.startswith("Stop: turn ended") and "[working -> idle]" in d for d in details)
    sent_out, network, done = codex_api.call_outputs(answered.body)
    assert REFUSED in network, network
    assert "marked 1 message done" in done, done
    assert "sent to michael" in sent_out, sent_out


@pytest.mark.skipif(GEMINI is None, reason="gemini CLI not found (run scripts/setup)")
def test_a_gemini_desk_on_another_host_is_woken_sends_mail_and_meets_the_policy(
    short_tmp: Path, host: SshHost
) -> None:
    mail: dict[str, str] = {}
    turns: list[Turn] = [
        turn(
            gemini_api.user_says(NUDGE),
            build=lambda req: [
                gemini_api.shell(SEND),
                gemini_api.shell(NETWORK),
                gemini_api.shell(f"hive done {mail['id']}"),
            ],
            delay=3.0,
        ),
        turn(gemini_api.has_tool_result(), "Sent."),
    ]
    office_options, options = on_host(host)
    floor = make_gemini_floor(short_tmp, turns, jim_options=options, office_options=office_options)
    try:
        # Returns once jim's SessionStart came from the host.
        floor.serve()
        assert runs_over_ssh(floor.jim())
        assert in_argv([gemini_office.API_KEY, *shipped_texts(floor.home, "jim")]) == {}
        mail["id"] = floor.mail_jim(MAIL)
        wait_for(lambda: floor.jim()["status"] == "working", "jim woken (BeforeAgent)")
        answered = floor.model.wait_for(lambda r: r.turn == 1, 90)
        wait_for(lambda: floor.jim()["status"] == "idle", "jim idle again (AfterAgent)")
        wait_for(lambda: not floor.inbox("jim"), "jim's `hive done` on the host")
        [sent] = wait_for(lambda: the_message_sent(floor.inbox("michael")), "jim's mail to michael")
        details = floor.log()
    finally:
        floor.stop()
        floor.model.stop()

    assert sent["from"] == "jim" and sent["body"] == "Sent on the remote host."
    assert len(the_message_sent(floor.inbox("michael"))) == 1
    # The key reached the CLI on the host, out of any argv.
    keys = {r.headers.get("x-goog-api-key") for r in floor.model.main_requests}
    assert keys == {gemini_office.API_KEY}, keys
    woken = [
        r
        for r in floor.model.main_requests
        if NUDGE in "\n".join(gemini_api.last_user_texts(r.body))
    ]
    assert len(woken) == 1, [gemini_api.last_user_texts(r.body) for r in woken]
    # BeforeAgent's answer came back over the link: the mail, listed for the model.
    assert MAIL in "\n".join(gemini_api.last_user_texts(woken[0].body))
    assert sum(d.startswith("nudged:") for d in details) == 1, details
    assert any("UserPromptSubmit" in d and "[idle -> working]" in d for d in details), details
    assert any(d.startswith("Stop: turn ended") and "[working -> idle]" in d for d in details)
    sent_out, network, done = (
        json.dumps(r["response"]) for r in gemini_api.function_responses(answered.body)
    )
    assert "Tool execution blocked" in network and REFUSED in network, network
    assert "marked 1 message done" in done, done
    assert "sent to michael" in sent_out and "Tool execution blocked" not in sent_out, sent_out
