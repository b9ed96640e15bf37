"""The `hive` command line: every verb's happy path and every refusal (nothing written)."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from hive_core import mail
from hive_core.cli.group import cli
from hive_core.cli.hive import main
from hive_core.fsio import append_line
from hive_core.hive import init_office, read_registry, write_registry
from hive_core.ids import created_at_of, new_message_id
from hive_core.paths import HivePaths
from hive_core.routing import rules as decide
from hive_core.schema import (
    BODY_MAX,
    SUBJECT_MAX,
    Cursor,
    Draft,
    LogEvent,
    Message,
    Registry,
)
from tests.conftest import Running

HIVE_BIN = Path(sys.executable).parent / "hive"


@dataclasses.dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def invoke(args: list[str], env: dict[str, str | None], stdin: bytes | str | None = None) -> Result:
    """`hive ARGS` through the console script's own entry point, in this process."""
    with CliRunner().isolation(input=stdin, env=env) as (out, err, _):
        try:
            main(args)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    return Result(code, out.getvalue().decode(), err.getvalue().decode())


def hive(
    paths: HivePaths, *args: str, agent: str | None = None, stdin: bytes | str | None = None
) -> Result:
    env = {"HIVE_HOME": str(paths.home), "HIVE_AGENT_ID": agent}
    return invoke(list(args), env, stdin)


def deliver(paths: HivePaths, to: str, *, sender: str = "jim", **fields: object) -> Message:
    """Put a routed message straight into an inbox, as the router would."""
    message_id = new_message_id()
    message = msgspec.convert(
        {
            "id": message_id,
            "conversation": message_id,
            "in_reply_to": None,
            "from": sender,
            "to": to,
            "act": "inform",
            "subject": "Hello",
            "body": "Body text",
            "created_at": created_at_of(message_id),
            **fields,
        },
        Message,
    )
    inbox = paths.mailbox(to).inbox
    (inbox / f"{message_id}.json").write_bytes(msgspec.json.encode(message))
    return message


def drafts(paths: HivePaths, who: str) -> list[Draft]:
    files = mail.message_files(paths.mailbox(who).outbox)
    return [msgspec.json.decode(f.read_bytes(), type=Draft) for f in files]


def log_event(paths: HivePaths, **fields: object) -> None:
    event = msgspec.convert({"ts": "2026-11-30T09:00:00.000Z", **fields}, LogEvent)
    append_line(paths.log, msgspec.json.encode(event))


# --- send ------------------------------------------------------------------------------


def test_send_without_office_leaves_one_valid_draft(office_home: HivePaths) -> None:
    result = hive(
        office_home,
        *("send", "--to", "pam", "--act", "request", "--subject", "Review"),
        *("--task", "T-1", "--needs-human", "--body", "Please look at parse()"),
        agent="jim",
    )
    assert result.exit_code == 0, result.output
    assert "queued agents/jim/outbox/" in result.stdout
    assert "office is not running" in result.stdout
    assert drafts(office_home, "jim") == [
        Draft(
            to="pam",
            act="request",
            subject="Review",
            body="Please look at parse()",
            task="T-1",
            needs_human=True,
        )
    ]
    files = os.listdir(office_home.mailbox("jim").outbox)
    assert len([f for f in files if not f.startswith(".")]) == 1


def test_send_json_says_where_it_went_as_the_text_does(office_home: HivePaths) -> None:
    """What MCP's send tool returns (cli/mcp_server.py runs `hive send --json`)."""
    result = hive(office_home, "send", "--json", "--to", "pam", "--body", "hi", agent="jim")
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["delivered_now"] is False  # no office runs: it waits in the outbox
    [name] = [f for f in os.listdir(office_home.mailbox("jim").outbox) if not f.startswith(".")]
    assert said["path"] == f"agents/jim/outbox/{name}"
    refused = hive(office_home, "send", "--json", "--to", "nobody", "--body", "hi", agent="jim")
    assert refused.exit_code == 2 and refused.stdout == "", refused.output


def test_send_as_human_goes_to_the_human_outbox(office_home: HivePaths) -> None:
    result = hive(office_home, "send", "--to", "god", "--body", "hi")
    assert result.exit_code == 0, result.output
    assert [d.to for d in drafts(office_home, "human")] == ["god"]


def test_send_kicks_a_running_office(short_tmp: Path) -> None:
    # A short home path: Unix socket paths are limited to ~100 bytes.
    home = short_tmp
    paths = HivePaths(home)
    init_office(paths)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(str(paths.kick_socket))
        result = hive(paths, "send", "--to", "jim", "--body", "hi", agent="pam")
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("sent to jim")
        assert sock.recv(64) == b"pam"
    finally:
        sock.close()


@pytest.mark.parametrize("flag", [["--body", "-"], ["-"]])
def test_send_body_from_stdin(office_home: HivePaths, flag: list[str]) -> None:
    result = hive(office_home, "send", "--to", "pam", *flag, agent="jim", stdin="line 1\nline 2\n")
    assert result.exit_code == 0, result.output
    assert drafts(office_home, "jim")[0].body == "line 1\nline 2\n"


def test_send_subject_only_is_allowed(office_home: HivePaths) -> None:
    result = hive(office_home, "send", "--to", "pam", "--subject", "ping", agent="jim")
    assert result.exit_code == 0, result.output


REFUSED_SENDS = {
    "unknown recipient": (["--to", "dwight", "--body", "x"], "no agent 'dwight'"),
    "path-like recipient": (["--to", "../jim", "--body", "x"], "not an address"),
    "absolute path recipient": (["--to", "/etc", "--body", "x"], "not an address"),
    "reserved non-address": (["--to", "router", "--body", "x"], "no agent 'router'"),
    "to yourself": (["--to", "jim", "--body", "x"], "is you"),
    "empty": (["--to", "pam", "--body", "  "], "the message is empty"),
    "long subject": (["--to", "pam", "--subject", "s" * (SUBJECT_MAX + 1), "--body", "x"], "limit"),
    "two-line subject": (["--to", "pam", "--subject", "a\nb", "--body", "x"], "one line"),
    "big body": (["--to", "pam", "--body", "é" * (BODY_MAX // 2 + 1)], "limit is 65536"),
    "stray argument": (["--to", "pam", "hello"], "unexpected argument 'hello'"),
    "body twice": (["--to", "pam", "--body", "x", "-"], "give the body once"),
}


@pytest.mark.parametrize("case", REFUSED_SENDS)
def test_send_refusals_write_nothing(office_home: HivePaths, case: str) -> None:
    args, expected = REFUSED_SENDS[case]
    result = hive(office_home, "send", *args, agent="jim")
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert result.stderr.startswith("hive: ")
    assert drafts(office_home, "jim") == []


def test_manager_cannot_mail_god(office_home: HivePaths) -> None:
    result = hive(office_home, "send", "--to", "god", "--body", "x", agent="michael")
    assert result.exit_code == 2
    assert "'god' is you" in result.stderr


def test_send_refuses_an_archived_agent(office_home: HivePaths) -> None:
    with office_home.office_toml.open("a") as f:
        f.write('\n[[agents]]\nid = "ryan"\nname = "Ryan"\narchived = true\n')
    result = hive(office_home, "send", "--to", "ryan", "--body", "x", agent="jim")
    assert result.exit_code == 2
    assert "archived" in result.stderr
    assert drafts(office_home, "jim") == []


def test_send_refuses_an_invalid_act(office_home: HivePaths) -> None:
    result = hive(office_home, "send", "--to", "pam", "--act", "shout", "--body", "x")
    assert result.exit_code == 2
    assert "shout" in result.stderr
    assert drafts(office_home, "human") == []


def test_a_body_of_control_characters_is_sent_and_routed_clean(office_home: HivePaths) -> None:
    # The CLI takes any UTF-8 text up to the limit; the router removes what must not
    # reach a terminal, so both sides agree on what is deliverable.
    noise = bytes(c for c in range(32) if c not in b"\t\n") + b"\x7f\x1b[2J"
    body = (noise * (BODY_MAX // len(noise) + 1))[:BODY_MAX]
    args = ("send", "--to", "pam", "--subject", "Noise", "-")
    result = hive(office_home, *args, agent="jim", stdin=body)
    assert result.exit_code == 0, result.output
    [path] = mail.message_files(office_home.mailbox("jim").outbox)
    draft = decide.parse_draft(path.read_bytes())
    assert isinstance(draft, Draft) and draft.body == body.decode()
    routed = decide.normalise(draft, msg_id=new_message_id(), sender="jim", parent=None)
    assert routed.body == "[2J" * body.count(b"\x1b[2J") and routed.subject == "Noise"
    over = hive(office_home, *args, agent="jim", stdin=body + b"\x01")
    assert over.exit_code == 2 and "more than 65536 bytes" in over.stderr
    assert len(drafts(office_home, "jim")) == 1


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [(b"caf\xe9\n", "not UTF-8"), (b"x" * (BODY_MAX + 1), "more than 65536 bytes")],
)
def test_send_refuses_bad_stdin(office_home: HivePaths, stdin: bytes, expected: str) -> None:
    result = hive(office_home, "send", "--to", "pam", "-", agent="jim", stdin=stdin)
    assert result.exit_code == 2
    assert expected in result.stderr
    assert drafts(office_home, "jim") == []


def test_bad_agent_id_is_refused(office_home: HivePaths) -> None:
    result = hive(office_home, "send", "--to", "pam", "--body", "x", agent="../../etc")
    assert result.exit_code == 2
    assert "HIVE_AGENT_ID is '../../etc'" in result.stderr
    assert not (office_home.agents_dir / "../../etc").exists()


# --- reply -----------------------------------------------------------------------------


@pytest.mark.parametrize("subject", ["Plan", "Re: Plan", "RE: Plan"])
def test_reply_threads_to_the_sender(office_home: HivePaths, subject: str) -> None:
    parent = deliver(
        office_home,
        "pam",
        sender="jim",
        subject=subject,
        act="query",
        task="T-7",
        conversation="conv-1",
    )
    result = hive(office_home, "reply", parent.id, "--act", "agree", "--body", "Yes", agent="pam")
    assert result.exit_code == 0, result.output
    assert drafts(office_home, "pam") == [
        Draft(
            to="jim",
            act="agree",
            subject=subject if subject.lower().startswith("re:") else f"Re: {subject}",
            body="Yes",
            in_reply_to=parent.id,
            conversation="conv-1",
            task="T-7",
        )
    ]


def test_reply_to_a_done_message_works(office_home: HivePaths) -> None:
    parent = deliver(office_home, "pam", sender="michael")
    assert mail.mark_done(office_home.mailbox("pam"), parent.id)
    result = hive(office_home, "reply", parent.id, "-", agent="pam", stdin="ok")
    assert result.exit_code == 0, result.output
    assert drafts(office_home, "pam")[0].to == "michael"


def test_reply_refusals(office_home: HivePaths) -> None:
    unknown = hive(office_home, "reply", "20261130T000000000000Z-abc", "--body", "x", agent="pam")
    assert unknown.exit_code == 1
    assert "no message" in unknown.stderr and "hive inbox" in unknown.stderr

    path_like = hive(office_home, "reply", "../../jim/inbox/x", "--body", "x", agent="pam")
    assert path_like.exit_code == 1

    from_router = deliver(office_home, "pam", sender="router")
    bounced = hive(office_home, "reply", from_router.id, "--body", "x", agent="pam")
    assert bounced.exit_code == 1
    assert "cannot reply" in bounced.stderr

    # A message pam sent (archived by the router in outbox/.sent) is not answerable by pam.
    mine = deliver(office_home, "jim", sender="pam")
    sent = office_home.mailbox("pam").sent
    (office_home.mailbox("jim").inbox / f"{mine.id}.json").rename(sent / f"{mine.id}.json")
    own = hive(office_home, "reply", mine.id, "--body", "x", agent="pam")
    assert own.exit_code == 2
    assert "you sent" in own.stderr

    parent = deliver(office_home, "pam")
    empty = hive(office_home, "reply", parent.id, "--body", "", agent="pam")
    assert empty.exit_code == 2
    assert drafts(office_home, "pam") == []


# --- inbox, read, done -----------------------------------------------------------------


def test_inbox_text_and_json(office_home: HivePaths) -> None:
    first = deliver(
        office_home, "pam", sender="jim", subject="First", act="request", requires_reply=True
    )
    second = deliver(
        office_home, "pam", sender="michael", subject="Second", body="line one\nline two"
    )
    text = hive(office_home, "inbox", agent="pam")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0] == "2 unread messages, oldest first:"
    assert first.id in lines[1] and "jim" in lines[1] and "request" in lines[1]
    assert "First" in lines[1] and "reply expected" in lines[1]
    assert second.id in text.stdout and "line one line two" in text.stdout
    assert "hive read ID" in lines[-1]

    as_json = hive(office_home, "inbox", "--json", agent="pam")
    messages = msgspec.json.decode(as_json.stdout, type=list[Message])
    assert [m.id for m in messages] == [first.id, second.id]


def test_inbox_empty(office_home: HivePaths) -> None:
    assert hive(office_home, "inbox", agent="jim").stdout == "No unread mail.\n"
    assert hive(office_home, "inbox", "--json", agent="jim").stdout == "[]\n"


def test_inbox_neutralises_escape_sequences(office_home: HivePaths) -> None:
    deliver(office_home, "pam", subject="\x1b[2Jwiped", body="\x1b]0;title\x07")
    out = hive(office_home, "inbox", agent="pam").stdout
    assert "\x1b" not in out and "\\x1b[2Jwiped" in out


def test_inbox_skips_a_hostile_file_with_a_note(office_home: HivePaths) -> None:
    before = deliver(office_home, "pam", subject="Before")
    inbox = office_home.mailbox("pam").inbox
    nested = b'{"to": "pam", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    (inbox / f"{new_message_id()}-nested\x1b[2J.json").write_bytes(nested)
    (inbox / f"{new_message_id()}-garbage.json").write_bytes(b"\xff\x00 not json")
    after = deliver(office_home, "pam", subject="After")
    for args in (["inbox"], ["inbox", "--json"]):
        result = hive(office_home, *args, agent="pam")
        assert result.exit_code == 0, result.output
        notes = result.stderr.splitlines()
        assert len(notes) == 2 and all(n.startswith("hive: skipped ") for n in notes)
        assert "nested" in notes[0] and "\x1b" not in result.stderr
        assert "garbage" in notes[1]
    listed = msgspec.json.decode(result.stdout, type=list[Message])
    assert [m.id for m in listed] == [before.id, after.id]
    assert len(mail.message_files(inbox)) == 4  # the bad files are left where they are


def test_read_text_json_and_missing(office_home: HivePaths) -> None:
    message = deliver(
        office_home,
        "pam",
        sender="jim",
        subject="Spec",
        body="All of it.",
        task="T-2",
        needs_human=True,
    )
    text = hive(office_home, "read", message.id, agent="pam")
    assert text.exit_code == 0, text.output
    assert "from:        jim" in text.stdout
    assert "state:       unread" in text.stdout
    assert "needs human: yes" in text.stdout
    assert "All of it." in text.stdout

    as_json = hive(office_home, "read", message.id, "--json", agent="pam")
    assert msgspec.json.decode(as_json.stdout, type=Message) == message
    assert (office_home.mailbox("pam").inbox / f"{message.id}.json").exists()  # still unread

    mail.mark_done(office_home.mailbox("pam"), message.id)
    assert "state:       done" in hive(office_home, "read", message.id, agent="pam").stdout

    missing = hive(office_home, "read", message.id, agent="jim")
    assert missing.exit_code == 1
    assert "no message" in missing.stderr


def test_done_moves_to_done_and_advances_cursor(office_home: HivePaths) -> None:
    box = office_home.mailbox("pam")
    first = deliver(office_home, "pam")
    second = deliver(office_home, "pam")
    result = hive(office_home, "done", first.id, agent="pam")
    assert result.exit_code == 0, result.output
    assert not (box.inbox / f"{first.id}.json").exists()
    assert (box.done / f"{first.id}.json").exists()
    assert msgspec.json.decode(box.cursor.read_bytes(), type=Cursor).last_processed == first.id

    again = hive(office_home, "done", first.id, agent="pam")
    assert again.exit_code == 0
    assert "already done" in again.stdout

    everything = hive(office_home, "done", "--all", agent="pam")
    assert everything.exit_code == 0
    assert "marked 1 message done" in everything.stdout
    assert mail.message_files(box.inbox) == []
    assert msgspec.json.decode(box.cursor.read_bytes(), type=Cursor).last_processed == second.id
    assert "nothing to mark" in hive(office_home, "done", "--all", agent="pam").stdout


def test_done_refusals(office_home: HivePaths) -> None:
    message = deliver(office_home, "pam")
    neither = hive(office_home, "done", agent="pam")
    assert neither.exit_code == 2
    both = hive(office_home, "done", message.id, "--all", agent="pam")
    assert both.exit_code == 2
    escape = hive(office_home, "done", f"../inbox/{message.id}", agent="pam")
    assert escape.exit_code == 1
    unknown = hive(office_home, "done", "nope", message.id, agent="pam")
    assert unknown.exit_code == 1
    assert "not in your inbox: nope" in unknown.stderr
    assert "marked 1 message done" in unknown.stdout  # the good id was still processed


# --- board, triage ---------------------------------------------------------------------


def test_board_read(office_home: HivePaths) -> None:
    result = hive(office_home, "board", agent="jim")
    assert result.exit_code == 0
    assert result.stdout == office_home.board.read_text()


def test_board_write_refused_for_non_manager(office_home: HivePaths) -> None:
    before = office_home.board.read_bytes()
    result = hive(office_home, "board", "--write", "-", stdin="# Mine now\n")
    assert result.exit_code == 1
    assert "only the manager (michael)" in result.stderr
    assert "hive triage" in result.stderr
    # An agent's claim needs a running office to prove it; without one it is refused.
    claimed = hive(office_home, "board", "--write", "-", agent="jim", stdin="# Mine now\n")
    assert claimed.exit_code == 1 and "office must be running" in claimed.stderr
    assert office_home.board.read_bytes() == before


def test_board_write_by_manager(
    running: Running, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    office_home = running.office.paths
    monkeypatch.setenv("HIVE_SECRET", running.office.states["michael"].secret)
    plan = tmp_path / "plan.md"
    plan.write_text("# Board\n\n- ship it\n")
    result = hive(office_home, "board", "--write", str(plan), agent="michael")
    assert result.exit_code == 0, result.output
    assert office_home.board.read_text() == "# Board\n\n- ship it\n"

    piped = hive(office_home, "board", "--write", "-", agent="michael", stdin="# v2\n")
    assert piped.exit_code == 0
    assert office_home.board.read_text() == "# v2\n"

    missing = hive(office_home, "board", "--write", str(tmp_path / "nope.md"), agent="michael")
    assert missing.exit_code == 2
    assert office_home.board.read_text() == "# v2\n"


def test_triage_files_a_request(office_home: HivePaths) -> None:
    result = hive(office_home, "triage", "Flaky test\n\ntest_router times out", agent="jim")
    assert result.exit_code == 0, result.output
    assert drafts(office_home, "jim") == [
        Draft(
            to="triage",
            act="request",
            subject="Flaky test",
            body="Flaky test\n\ntest_router times out",
        )
    ]


def test_triage_joins_words_and_caps_subject(office_home: HivePaths) -> None:
    hive(office_home, "triage", "parser", "crashes", agent="jim")
    hive(office_home, "triage", "-", agent="pam", stdin="x" * 500)
    assert drafts(office_home, "jim")[0].subject == "parser crashes"
    subject = drafts(office_home, "pam")[0].subject
    assert len(subject) == SUBJECT_MAX and subject.endswith("…")


def test_triage_empty_is_refused(office_home: HivePaths) -> None:
    result = hive(office_home, "triage", "  ", agent="jim")
    assert result.exit_code == 2
    assert drafts(office_home, "jim") == []


# --- roster, log -----------------------------------------------------------------------


def test_roster_json_and_text(office_home: HivePaths) -> None:
    registry = read_registry(office_home)
    assert registry is not None
    registry.agents[1].status = "working"
    write_registry(office_home, registry)

    result = hive(office_home, "roster", "--json", agent="jim")
    decoded = msgspec.json.decode(result.stdout, type=Registry)
    assert decoded.manager == "michael"
    assert [(a.id, a.manager, a.status) for a in decoded.agents] == [
        ("michael", True, "offline"),
        ("jim", False, "working"),
        ("pam", False, "offline"),
        ("pete", False, "offline"),
    ]
    text = hive(office_home, "roster", agent="jim").stdout
    assert "michael*" in text and "jim (you)" in text and "working" in text


def test_log_filters_by_agent(office_home: HivePaths) -> None:
    log_event(
        office_home,
        kind="route",
        msg="m1",
        **{"from": "jim"},
        to="pam",
        recipients=["pam"],
        act="request",
        subject="One",
    )
    log_event(office_home, kind="agent", agent="pete", detail="started")
    log_event(
        office_home,
        kind="route",
        msg="m2",
        **{"from": "pam"},
        to="broadcast",
        recipients=["jim", "michael"],
        act="inform",
        subject="Two",
    )
    append_line(office_home.log, b"not json")

    result = hive(office_home, "log", "--json", "--agent", "jim")
    assert result.exit_code == 0, result.output
    events = [msgspec.json.decode(line, type=LogEvent) for line in result.stdout.splitlines()]
    assert [e.msg for e in events] == ["m1", "m2"]

    last = hive(office_home, "log", "--json", "-n", "1").stdout.splitlines()
    assert [msgspec.json.decode(line, type=LogEvent).msg for line in last] == ["m2"]

    text = hive(office_home, "log").stdout
    assert "jim -> pam" in text and "pete" in text and "pam -> broadcast (jim, michael)" in text

    bad = hive(office_home, "log", "--agent", "../x")
    assert bad.exit_code == 2


def test_log_reads_rotated_segments_and_passes_over_deep_lines(office_home: HivePaths) -> None:
    log_event(office_home, kind="office", detail="first")
    office_home.log_segments.mkdir()
    office_home.log.rename(office_home.log_segments / "0001.jsonl")
    append_line(office_home.log, b'{"ts": "x", "kind": ' + b"[" * 1000 + b"]" * 1000 + b"}")
    log_event(office_home, kind="office", detail="second")

    def details(*args: str) -> list[str | None]:
        result = hive(office_home, "log", "--json", *args)
        assert result.exit_code == 0 and result.stderr == "", result.output
        return [msgspec.json.decode(ln, type=LogEvent).detail for ln in result.stdout.splitlines()]

    assert details("-n", "0") == ["first", "second"]
    assert details("-n", "2") == ["first", "second"]
    assert details("-n", "1") == ["second"]


# --- outside an office, help, real processes -------------------------------------------


def test_no_office_is_a_clear_error(tmp_path: Path) -> None:
    result = invoke(["inbox"], {"HIVE_HOME": str(tmp_path / "none")})
    assert result.exit_code == 1
    assert "hive-office init" in result.stderr


@pytest.mark.parametrize(
    "verb", ["send", "reply", "inbox", "read", "done", "board", "triage", "roster", "log"]
)
def test_every_verb_has_help_with_examples(verb: str) -> None:
    result = invoke([verb, "--help"], {})
    assert result.exit_code == 0
    assert f"hive {verb}" in result.stdout


def test_every_contract_verb_is_there() -> None:
    listed = invoke(["--help"], {}).stdout.split("Commands:")[1]
    assert {line.split()[0] for line in listed.splitlines() if line.strip()} >= {
        *("send", "reply", "inbox", "read", "done", "board", "triage", "roster", "log"),
        *("task", "memory", "mcp"),
    }


def run_hive(
    paths: HivePaths | None,
    *args: str,
    agent: str | None = None,
    stdin: bytes = b"",
    home: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("HIVE_HOME", "HIVE_AGENT_ID")}
    env["HIVE_HOME"] = str(home or (paths.home if paths else "/nonexistent"))
    if agent:
        env["HIVE_AGENT_ID"] = agent
    return subprocess.run(
        [str(HIVE_BIN), *args], input=stdin, env=env, capture_output=True, timeout=30, check=False
    )


def test_subprocess_send_inbox_done(office_home: HivePaths) -> None:
    sent = run_hive(
        office_home,
        "send",
        "--to",
        "pam",
        "--subject",
        "Hi",
        "-",
        agent="jim",
        stdin="über\n".encode(),
    )
    assert sent.returncode == 0, sent.stderr
    assert drafts(office_home, "jim")[0].body == "über\n"

    message = deliver(office_home, "jim", sender="pam")
    listed = run_hive(office_home, "inbox", "--json", agent="jim")
    assert [m.id for m in msgspec.json.decode(listed.stdout, type=list[Message])] == [message.id]
    assert run_hive(office_home, "done", "--all", agent="jim").returncode == 0
    assert (office_home.mailbox("jim").done / f"{message.id}.json").exists()


# What agents' mail calls must not import: the event loop, the memory index, the click
# machinery, git, the app, the MCP server; and what costs a mail call a fifth of its
# start-up for nothing (inspect, through typing_extensions or dataclasses).
HEAVY_MODULES = (
    *("asyncio", "click", "hive_core.memory", "sqlite3", "pygit2", "textual", "mcp"),
    *("typing_extensions", "inspect", "dataclasses"),
)


# What the console script does (`from hive_core.cli.hive import main`), then the list
# of every module the run imported.
LIST_MODULES = """
import sys
from hive_core.cli.hive import main
try:
    main(sys.argv[1:])
finally:
    sys.stderr.write("\\n".join(sys.modules))
"""


def imported_by(paths: HivePaths, *args: str, agent: str) -> set[str]:
    """The modules `hive ARGS` imports, run as its console script runs it."""
    env = {**os.environ, "HIVE_HOME": str(paths.home), "HIVE_AGENT_ID": agent}
    ran = subprocess.run(
        [sys.executable, "-c", LIST_MODULES, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return set(ran.stderr.splitlines())


def test_mail_verbs_import_nothing_heavy(office_home: HivePaths) -> None:
    first = deliver(office_home, "jim", sender="pam")
    second = deliver(office_home, "jim", sender="pam")
    runs = {
        "inbox": imported_by(office_home, "inbox", agent="jim"),
        "read": imported_by(office_home, "read", first.id, agent="jim"),
        "reply": imported_by(office_home, "reply", first.id, "--body", "ok", agent="jim"),
        "send": imported_by(office_home, "send", "--to", "pam", "--body", "hi", agent="jim"),
        "done": imported_by(office_home, "done", first.id, second.id, agent="jim"),
    }
    for verb, modules in runs.items():
        assert "hive_core.mail" in modules, verb  # the listing is real
        heavy = {m for m in modules if m.split(".")[0] in HEAVY_MODULES or m in HEAVY_MODULES}
        assert heavy == set(), verb
    assert len(drafts(office_home, "jim")) == 2
    assert mail.message_files(office_home.mailbox("jim").inbox) == []
    # The other verbs go through click, so the check above can tell.
    assert "click" in imported_by(office_home, "roster", agent="jim")


def test_main_turns_the_collector_back_on(office_home: HivePaths) -> None:
    # Off while a mail verb starts; `hive mcp` and `hive log -f` run for hours.
    for args in (["inbox"], ["send", "--to", "nobody"], ["roster"]):
        hive(office_home, *args, agent="jim")
        assert gc.isenabled(), args


def test_the_click_group_runs_mail_verbs_the_same_way(office_home: HivePaths) -> None:
    runner = CliRunner(env={"HIVE_AGENT_ID": "jim", "HIVE_HOME": None})
    home = str(office_home.home)
    sent = runner.invoke(cli, ["--home", home, "send", "--to", "pam", "--body", "--force"])
    assert sent.exit_code == 0, sent.output
    assert [d.body for d in drafts(office_home, "jim")] == ["--force"]
    refused = runner.invoke(cli, ["--home", home, "send", "--to", "nobody", "--body", "x"])
    assert refused.exit_code == 2
    assert refused.stderr.startswith("hive: there is no agent 'nobody'")
    helped = runner.invoke(cli, ["send", "--help"])
    assert helped.exit_code == 0 and "hive send --to jim" in helped.stdout


def test_option_values_may_start_with_a_dash(office_home: HivePaths) -> None:
    # As click parses: the word after --body or --subject is its value, whatever it is.
    sent = hive(
        office_home, "send", "--to", "pam", "--subject", "-x", "--body", "--dry-run", agent="jim"
    )
    assert sent.exit_code == 0, sent.output
    assert [(d.subject, d.body) for d in drafts(office_home, "jim")] == [("-x", "--dry-run")]
    assert len(drafts(office_home, "jim")) == 1


# Usage errors of the mail verbs, word for word as click wrote them when it parsed them.
USAGE_ERRORS = {
    ("send", "--to", "pam", "--needs"): "No such option '--needs'. Did you mean '--needs-human'?",
    ("send", "--tx"): "No such option '--tx'. (Did you mean one of: '--act', '--task', '--to'?)",
    ("send",): "Missing option '--to'.",
    ("send", "--to", "pam", "--act", "x"): "Invalid value for '--act': 'x' is not one of "
    "'request', 'inform', 'propose', 'query', 'agree', 'refuse', 'done'.",
    ("reply",): "Missing argument 'MSGID'.",
    ("read", "a", "b"): "Got unexpected extra argument (b)",
}


@pytest.mark.parametrize("args", USAGE_ERRORS)
def test_mail_verb_usage_errors_read_as_before(office_home: HivePaths, args: tuple[str]) -> None:
    result = hive(office_home, *args, agent="jim")
    assert result.exit_code == 2
    usage = {"send": "[OPTIONS] [-]", "reply": "[OPTIONS] MSGID [-]", "read": "[OPTIONS] MSGID"}
    assert result.stderr == (
        f"Usage: hive {args[0]} {usage[args[0]]}\nTry 'hive {args[0]} --help' for help.\n\n"
        f"Error: {USAGE_ERRORS[args]}\n"
    )
    assert drafts(office_home, "jim") == []


def test_an_option_without_its_value_is_one_line(office_home: HivePaths) -> None:
    for args, expected in [
        (("send", "--to"), "Error: Option '--to' requires an argument.\n"),
        (("inbox", "--json=yes"), "Error: Option '--json' does not take a value.\n"),
    ]:
        result = hive(office_home, *args, agent="jim")
        assert (result.exit_code, result.stderr) == (2, expected)
    assert hive(office_home, "inbox", "--json", agent="jim").exit_code == 0


def test_help_comes_after_reading_every_word_as_in_click(office_home: HivePaths) -> None:
    # A word click cannot read is an error even after --help; a value it would only
    # check later (a choice, a missing option or argument) is not.
    unreadable = hive(office_home, "send", "--help", "--bogus", agent="jim")
    assert unreadable.exit_code == 2 and "No such option '--bogus'" in unreadable.stderr
    for args in (["send", "--act", "x", "-h"], ["reply", "--help"], ["read", "a", "b", "-h"]):
        helped = hive(office_home, *args, agent="jim")
        assert helped.exit_code == 0 and helped.stdout.startswith(f"Usage: hive {args[0]} ")


def test_mail_verb_help_is_laid_out_as_click_does(office_home: HivePaths) -> None:
    text = invoke(["send", "--help"], {"COLUMNS": "80"}).stdout
    assert text.startswith("Usage: hive send [OPTIONS] [-]\n\n  Send a message")
    assert "\n    git diff | hive send --to pam" in text
    assert "  --to ID                         An agent id, or god (the manager), human,\n" in text
    assert "  --act [request|inform|propose|query|agree|refuse|done]\n" in text
    assert "the others end a thread.  [default: inform]\n" in text
    assert text.endswith("  -h, --help                      Show this message and exit.\n")


def test_subprocess_errors_have_no_traceback(tmp_path: Path, office_home: HivePaths) -> None:
    nowhere = run_hive(None, "inbox", home=tmp_path / "missing")
    assert nowhere.returncode == 1
    assert b"hive-office init" in nowhere.stderr and b"Traceback" not in nowhere.stderr

    not_utf8 = run_hive(office_home, "send", "--to", "pam", "-", agent="jim", stdin=b"\xff\xfe")
    assert not_utf8.returncode == 2
    assert b"not UTF-8" in not_utf8.stderr and b"Traceback" not in not_utf8.stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "hive").mkdir()
    (broken / "office.toml").write_text("[office\n")
    bad_toml = run_hive(None, "roster", home=broken)
    assert bad_toml.returncode == 1
    assert b"office.toml" in bad_toml.stderr and b"Traceback" not in bad_toml.stderr


def test_subprocess_log_follow(office_home: HivePaths) -> None:
    env = {**os.environ, "HIVE_HOME": str(office_home.home)}
    log_event(office_home, kind="office", detail="started")
    proc = subprocess.Popen(
        [str(HIVE_BIN), "log", "--follow", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # As from a terminal: a suite started in the background (`pytest &`) inherits an
        # ignored SIGINT, and Python then never turns Ctrl+C into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        first = msgspec.json.decode(proc.stdout.readline(), type=LogEvent)
        assert first.detail == "started"
        time.sleep(0.3)
        # Half a line first: follow must wait for the newline before printing it.
        event = msgspec.json.encode(
            LogEvent(ts="2026-11-30T09:00:01.000Z", kind="agent", agent="jim", detail="idle")
        )
        with office_home.log.open("ab") as f:
            f.write(event[:10])
            f.flush()
            time.sleep(0.6)
            f.write(event[10:] + b"\n")
        second = msgspec.json.decode(proc.stdout.readline(), type=LogEvent)
        assert second.agent == "jim"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_home_option_before_or_after_the_verb(office_home: HivePaths, tmp_path: Path) -> None:
    env: dict[str, str | None] = {"HIVE_HOME": str(tmp_path / "elsewhere"), "HIVE_AGENT_ID": None}
    home = str(office_home.home)
    for verb in ("roster", "inbox"):
        assert invoke(["--home", home, verb, "--json"], env).exit_code == 0
        assert invoke([f"--home={home}", verb, "--json"], env).exit_code == 0
        assert invoke([verb, "--home", home, "--json"], env).exit_code == 0
        assert invoke([verb], env).exit_code == 1
