"""The router on a real disk: delivery, archive, log, and every kind of bad input."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import msgspec
import pytest

from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.mail import iter_inbox, message_files, write_draft
from hive_core.paths import HivePaths
from hive_core.routing.router import WRITE_GRACE_S, Router
from hive_core.routing.rules import RouteRoster
from hive_core.schema import BODY_MAX, Draft, LogEvent, Message


@pytest.fixture
def office(tmp_path: Path) -> HivePaths:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    return paths


def make_router(paths: HivePaths, archived: frozenset[str] = frozenset()) -> Router:
    return Router(
        paths, RouteRoster.from_config(load_office(paths.office_toml), archived), fsync=False
    )


def inbox(paths: HivePaths, who: str) -> list[Message]:
    return list(iter_inbox(paths.mailbox(who)))


def log_events(paths: HivePaths) -> list[LogEvent]:
    return [
        msgspec.json.decode(line, type=LogEvent) for line in paths.log.read_bytes().splitlines()
    ]


def put_raw(paths: HivePaths, who: str, name: str, data: bytes, *, age: float = 10.0) -> Path:
    """A hand-written outbox file, old enough that the router will not wait for it."""
    path = paths.mailbox(who).outbox / name
    path.write_bytes(data)
    past = time.time() - age
    os.utime(path, (past, past))
    return path


def send(paths: HivePaths, who: str, **fields: object) -> Path:
    return write_draft(paths.mailbox(who), Draft(**fields))  # type: ignore[arg-type]


# --- the happy path ------------------------------------------------------------------


def test_delivers_archives_and_logs(office: HivePaths) -> None:
    src = send(office, "jim", to="michael", act="request", subject="review?", body="please")
    make_router(office).scan_all()

    [msg] = inbox(office, "michael")
    assert (msg.sender, msg.to, msg.act, msg.subject, msg.body) == (
        "jim",
        "michael",
        "request",
        "review?",
        "please",
    )
    assert msg.requires_reply and msg.hops == 0 and msg.in_reply_to is None
    assert msg.conversation == msg.id and msg.created_at.endswith("Z")
    assert not src.exists()
    assert [p.name for p in message_files(office.mailbox("jim").sent)] == [f"{msg.id}.json"]
    assert not list(office.mailbox("jim").routing.iterdir())
    [event] = log_events(office)
    assert (event.kind, event.msg, event.sender, event.recipients) == (
        "route",
        msg.id,
        "jim",
        ["michael"],
    )


def test_router_owns_id_from_hops_and_requires_reply(office: HivePaths) -> None:
    forged = {
        "to": "michael",
        "act": "inform",
        "subject": "s",
        "body": "b",
        "id": "forged",
        "from": "michael",
        "hops": 99,
        "requires_reply": True,
        "created_at": "1999",
    }
    put_raw(office, "jim", "x.json", json.dumps(forged).encode())
    make_router(office).scan_all()
    [msg] = inbox(office, "michael")
    assert msg.id != "forged" and msg.sender == "jim" and msg.hops == 0
    assert msg.requires_reply is False and msg.created_at != "1999"


def test_reply_inherits_thread_and_counts_hops(office: HivePaths) -> None:
    router = make_router(office)
    send(office, "jim", to="pam", act="query", subject="q", body="?")
    router.scan_all()
    [question] = inbox(office, "pam")
    send(office, "pam", to="jim", act="inform", subject="Re: q", body="!", in_reply_to=question.id)
    router.scan_all()
    [answer] = inbox(office, "jim")
    assert answer.in_reply_to == question.id
    assert answer.conversation == question.conversation
    assert answer.hops == 1 and answer.requires_reply is False


def test_god_goes_to_manager(office: HivePaths) -> None:
    send(office, "jim", to="god", subject="help", body="b")
    make_router(office).scan_all()
    assert [m.to for m in inbox(office, "michael")] == ["god"]


def test_human_goes_to_manager_flagged_and_to_person(office: HivePaths) -> None:
    send(office, "jim", to="human", act="query", subject="may I drop the table?", body="b")
    make_router(office).scan_all()
    [to_manager] = inbox(office, "michael")
    [to_person] = inbox(office, "human")
    assert to_manager.needs_human and to_person.id == to_manager.id
    assert log_events(office)[-1].recipients == ["michael", "human"]


def test_broadcast_skips_sender_archived_and_send_only(office: HivePaths) -> None:
    toml = (
        office.office_toml.read_text()
        + '\n[[agents]]\nid = "kevin"\nname = "Kevin"\nsend_only = true\n'
    )
    office.office_toml.write_text(toml)
    for who in ("kevin",):
        from hive_core.hive import ensure_mailbox

        ensure_mailbox(office, who)
    send(office, "jim", to="broadcast", subject="lunch", body="pizza")
    make_router(office, archived=frozenset({"pete"})).scan_all()
    assert [who for who in ("michael", "jim", "pam", "pete", "kevin") if inbox(office, who)] == [
        "michael",
        "pam",
    ]
    assert log_events(office)[-1].recipients == ["michael", "pam"]


def test_triage_is_filed_and_manager_told(office: HivePaths) -> None:
    send(office, "jim", to="triage", act="request", subject="flaky test", body="test_x fails 1/10")
    make_router(office).scan_all()
    [filed] = list(office.triage.glob("*.json"))
    triage = msgspec.json.decode(filed.read_bytes(), type=Message)
    assert triage.sender == "jim" and triage.body == "test_x fails 1/10"
    [notice] = inbox(office, "michael")
    assert notice.sender == "router" and triage.id in notice.body and "test_x fails" in notice.body


def test_hand_written_file_is_accepted_if_valid(office: HivePaths) -> None:
    put_raw(office, "jim", "note-to-pam.json", b'{"to": "pam", "body": "hi"}')
    make_router(office).scan_all()
    assert [m.body for m in inbox(office, "pam")] == ["hi"]


def test_person_can_send(office: HivePaths) -> None:
    send(office, "human", to="jim", act="request", subject="do x", body="now")
    make_router(office).scan_all()
    [msg] = inbox(office, "jim")
    assert msg.sender == "human"


# --- bad input: quarantined with a reason, sender told, nothing lost -------------------


def assert_quarantined(paths: HivePaths, who: str, source: str, reason_part: str) -> None:
    box = paths.mailbox(who)
    assert not (box.outbox / source).exists(), "the bad file must leave the outbox"
    reasons = list(box.bad.glob("*.reason"))
    assert len(reasons) == 1
    text = reasons[0].read_text()
    assert source in text and reason_part in text, text
    kept = reasons[0].with_suffix(".json")
    if "moved out of the hive's git to " in text:
        # Too large to be a message: only its record is in .bad (test_bounds.py).
        kept = Path(text.split("moved out of the hive's git to ")[1].split("\n")[0])
    assert kept.exists() or kept.is_symlink(), "the original bytes are kept"
    [notice] = inbox(paths, who)
    assert notice.sender == "router" and reason_part in notice.body and source in notice.body
    event = log_events(paths)[-1]
    assert (
        event.kind == "quarantine" and event.sender == who and reason_part in (event.reason or "")
    )
    others = [w for w in ("michael", "jim", "pam", "pete") if w != who]
    assert not any(inbox(paths, w) for w in others), "nothing bad is delivered"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"to": "pam", "subject": 5, "body": "x"}', "Expected `str`, got `int`"),
        (b'{"subject": "s", "body": "x"}', "missing required field `to`"),
        (b'{"to": "pam", "act": "shout", "body": "x"}', "act"),
        (b'["to", "pam"]', "Expected `object`"),
        (b'{"to": "../jim", "body": "x"}', "never paths"),
        (b'{"to": "/etc", "body": "x"}', "never paths"),
        (b'{"to": "jim/../../etc", "body": "x"}', "never paths"),
        (b"", "empty"),
        (b'{"to": "pam", "body": "caf\xe9"}', "not UTF-8"),
        (b'{"to": "pam", "subject": "", "body": "  "}', "neither a subject nor a body"),
        (json.dumps({"to": "pam", "subject": "s" * 201, "body": "x"}).encode(), "subject is 201"),
        (json.dumps({"to": "pam", "body": "x" * (BODY_MAX + 1)}).encode(), "body is 65537 bytes"),
        (b'{"to": "pam", "body": "' + b"x" * (7 * BODY_MAX) + b'"}', "over the"),
        (b'{"to": "jim", "body": "me"}', "to yourself"),
        (
            b'{"to": "pam", "body": "re", "in_reply_to": "20260101T000000000000Z-abc"}',
            "not a message you received or sent",
        ),
    ],
    ids=[
        "invalid-json",
        "wrong-type",
        "missing-to",
        "bad-act",
        "not-object",
        "to-dotdot",
        "to-abs-path",
        "to-traversal",
        "empty",
        "non-utf8",
        "no-content",
        "subject-long",
        "body-long",
        "file-oversize",
        "to-self",
        "reply-unknown",
    ],
)
def test_bad_input_is_quarantined(office: HivePaths, data: bytes, reason: str) -> None:
    put_raw(office, "jim", "m.json", data)
    make_router(office).scan_all()
    assert_quarantined(office, "jim", "m.json", reason)


def test_symlink_in_outbox_is_quarantined_not_followed(office: HivePaths, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"to": "pam", "body": "stolen"}')
    os.symlink(secret, office.mailbox("jim").outbox / "link.json")
    make_router(office).scan_all()
    assert_quarantined(office, "jim", "link.json", "symbolic link")
    assert secret.read_text() == '{"to": "pam", "body": "stolen"}'


def test_temp_names_are_ignored_until_renamed(office: HivePaths) -> None:
    out = office.mailbox("jim").outbox
    (out / ".tmp-123-m.json").write_text('{"to": "pam", "bo')
    (out / "m.json.part").write_text('{"to": "pam", "body": "x"}')
    router = make_router(office)
    router.scan_all()
    assert not inbox(office, "pam") and not inbox(office, "jim")
    (out / ".tmp-123-m.json").write_text('{"to": "pam", "body": "done"}')
    os.rename(out / ".tmp-123-m.json", out / "m.json")
    router.scan_all()
    assert [m.body for m in inbox(office, "pam")] == ["done"]


def test_young_unparseable_file_waits_then_is_quarantined(office: HivePaths) -> None:
    path = put_raw(office, "jim", "slow.json", b'{"to": "pam", "bo', age=0)
    router = make_router(office)
    router.scan_all()
    assert path.exists() and path in router.deferred, "a file being written is left alone"
    past = time.time() - WRITE_GRACE_S - 1
    os.utime(path, (past, past))
    router.scan_all()
    assert_quarantined(office, "jim", "slow.json", "not valid JSON")


def test_unknown_recipient_bounces_to_manager_and_tells_sender(office: HivePaths) -> None:
    send(office, "jim", to="toby", act="request", subject="hr question", body="b")
    make_router(office).scan_all()
    [bounce] = inbox(office, "michael")
    assert bounce.sender == "router" and "toby" in bounce.body and "hr question" in bounce.body
    [told] = inbox(office, "jim")
    assert "not delivered" in told.body and "toby" in told.body
    event = log_events(office)[-1]
    assert (event.kind, event.to, event.recipients) == ("bounce", "toby", ["michael"])
    assert len(message_files(office.mailbox("jim").sent)) == 1, "the original is archived"


def test_archived_recipient_bounces(office: HivePaths) -> None:
    send(office, "jim", to="pete", subject="look up x", body="b")
    make_router(office, archived=frozenset({"pete"})).scan_all()
    assert not inbox(office, "pete")
    [bounce] = inbox(office, "michael")
    assert "archived" in bounce.body


def test_manager_bounce_goes_to_person(office: HivePaths) -> None:
    send(office, "michael", to="toby", subject="s", body="b")
    make_router(office).scan_all()
    assert [m.sender for m in inbox(office, "human")] == ["router"]
    assert [m.sender for m in inbox(office, "michael")] == ["router"]  # told, not the bounce


def test_reply_chain_past_hop_cap_goes_to_manager(office: HivePaths) -> None:
    router = make_router(office)
    cap = router.roster.hop_cap
    send(office, "jim", to="pam", act="query", subject="ping", body="0")
    router.scan_all()
    sender, receiver = "pam", "jim"
    for _ in range(cap):
        [last] = inbox(office, sender)
        os.rename(
            office.mailbox(sender).inbox / f"{last.id}.json",
            office.mailbox(sender).done / f"{last.id}.json",
        )
        send(
            office,
            sender,
            to=receiver,
            act="query",
            subject="ping",
            body="again",
            in_reply_to=last.id,
        )
        router.scan_all()
        sender, receiver = receiver, sender
    [last] = inbox(office, sender)
    assert last.hops == cap
    os.rename(
        office.mailbox(sender).inbox / f"{last.id}.json",
        office.mailbox(sender).done / f"{last.id}.json",
    )
    send(office, sender, to=receiver, act="query", subject="ping", body="over", in_reply_to=last.id)
    router.scan_all()
    assert not inbox(office, receiver), "past the cap the target gets nothing"
    loops = [m for m in inbox(office, "michael") if m.sender == "router"]
    assert len(loops) == 1 and "hop" in loops[0].body and "over" in loops[0].body
    assert "hop cap" in inbox(office, sender)[0].body
    assert log_events(office)[-1].kind == "loop"


def test_a_claim_rewritten_after_it_was_read_is_routed_as_rewritten(office: HivePaths) -> None:
    """The router reads a file once, when it claims it, and routes from that read only
    while the claim is still the same file, unchanged; an agent that rewrites it in
    place in between gets its new text routed (and a file left alone, its only read)."""

    class RewritingRouter(Router):
        def _claim(self, who, path, stats):  # type: ignore[no-untyped-def]
            work = super()._claim(who, path, stats)
            if work is not None and work.source_name.startswith("rewritten"):
                with open(work.claim, "r+b") as f:
                    f.truncate()
                    f.write(msgspec.json.encode(Draft(to="michael", body="second, longer")))
            return work

    router = RewritingRouter(
        office, RouteRoster.from_config(load_office(office.office_toml)), fsync=False
    )
    put_raw(office, "jim", "rewritten.json", b'{"to": "michael", "body": "first"}', age=0)
    put_raw(office, "jim", "kept.json", b'{"to": "pam", "body": "kept"}', age=0)
    router.scan_all()

    assert [m.body for m in inbox(office, "michael")] == ["second, longer"]
    assert [m.body for m in inbox(office, "pam")] == ["kept"]


# --- idempotence -----------------------------------------------------------------------


def test_redelivery_of_a_read_message_is_a_no_op(office: HivePaths) -> None:
    """A crash after delivery and after the reader marked it done must not deliver again."""
    router = make_router(office)
    send(office, "jim", to="pam", subject="s", body="b")
    router.scan_all()
    [msg] = inbox(office, "pam")
    # Simulate the crash: put the claim back as if archive never happened.
    sent = office.mailbox("jim").sent / f"{msg.id}.json"
    claim = office.mailbox("jim").routing / f"{msg.id}~orig.json"
    claim.write_bytes(b'{"to": "pam", "subject": "s", "body": "b"}')
    sent.unlink()
    os.rename(
        office.mailbox("pam").inbox / f"{msg.id}.json",
        office.mailbox("pam").done / f"{msg.id}.json",
    )
    router.recover()
    assert not inbox(office, "pam")
    assert len(list(office.mailbox("pam").done.glob("*.json"))) == 1
    assert [e.msg for e in log_events(office)] == [msg.id], "the log line is not repeated"
    assert sent.exists() and not claim.exists()
