"""The router against what an agent can put in its own folders: every case is routed or
quarantined with a reason, nothing it plants is followed or delivered elsewhere, and
the next message still goes through. A real Router on a real temp hive."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_core.config import load_office
from hive_core.fsio import append_line
from hive_core.hive import ensure_mailbox, init_office
from hive_core.mail import (
    BadMessage,
    find_message,
    iter_inbox,
    load_message,
    mark_done,
    write_draft,
)
from hive_core.paths import HivePaths
from hive_core.routing import router as router_module
from hive_core.routing.router import WRITE_GRACE_S, DiskFull, Router
from hive_core.routing.rules import RouteRoster
from hive_core.schema import BODY_MAX, Draft, LogEvent, Message
from tests.conftest import Running
from tests.support import wait_for

NESTED = b'{"to":"pam","body":"x","x":' + b"[" * 1000 + b"]" * 1000 + b"}"


@pytest.fixture
def office(tmp_path: Path) -> HivePaths:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    return paths


def make_router(paths: HivePaths) -> Router:
    return Router(paths, RouteRoster.from_config(load_office(paths.office_toml)), fsync=False)


def inbox(paths: HivePaths, who: str) -> list[Message]:
    return list(iter_inbox(paths.mailbox(who)))


def subjects(paths: HivePaths, who: str) -> list[str]:
    return [m.subject for m in inbox(paths, who)]


def log_events(paths: HivePaths) -> list[LogEvent]:
    return [
        msgspec.json.decode(line, type=LogEvent) for line in paths.log.read_bytes().splitlines()
    ]


def plant(path: Path, data: bytes, *, age: float = 10.0) -> Path:
    path.write_bytes(data)
    past = time.time() - age
    os.utime(path, (past, past), follow_symlinks=False)
    return path


def send(paths: HivePaths, who: str, **fields: object) -> Path:
    return write_draft(paths.mailbox(who), Draft(**fields))  # type: ignore[arg-type]


def reasons(paths: HivePaths, who: str) -> str:
    return "".join(p.read_text() for p in paths.mailbox(who).bad.glob("*.reason"))


def told(paths: HivePaths, who: str) -> list[Message]:
    return [m for m in inbox(paths, who) if m.sender == "router"]


def assert_canary(paths: HivePaths, router: Router, n: int) -> None:
    """A message sent after the hostile input still goes through."""
    send(paths, "michael", to="pam", subject=f"canary {n}", body="still routing")
    router.scan_all()
    assert subjects(paths, "pam").count(f"canary {n}") == 1


# --- bounded decoding -----------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [NESTED, b"[" * 5000 + b"]" * 5000, b'{"to":"pam","body":"x","x":' + b"{" * 3000],
    ids=["in-unknown-field", "top-level", "unclosed"],
)
def test_deeply_nested_draft_is_quarantined(office: HivePaths, data: bytes) -> None:
    plant(office.mailbox("jim").outbox / "deep.json", data)
    router = make_router(office)
    router.scan_all()
    assert "nested" in reasons(office, "jim") and "deep.json" in reasons(office, "jim")
    assert any("deep.json" in m.body for m in told(office, "jim"))
    assert_canary(office, router, 1)


def test_shallow_unknown_fields_still_route(office: HivePaths) -> None:
    """The depth limit refuses only what is too deep: a copy of a message with extra
    nested fields a few levels deep is still mail."""
    plant(
        office.mailbox("jim").outbox / "m.json",
        b'{"to":"pam","subject":"s","body":"[[[{{{","x":[[{"y":[1]}]]}',
    )
    make_router(office).scan_all()
    assert [m.body for m in inbox(office, "pam")] == ["[[[{{{"]


def test_hostile_files_in_an_inbox_are_skipped_and_reported(office: HivePaths) -> None:
    box = office.mailbox("pam")
    send(office, "jim", to="pam", subject="real", body="b")
    make_router(office).scan_all()
    plant(box.inbox / "20260101T000000000000Z-deep.json", NESTED)
    plant(box.inbox / "20260101T000000000001Z-junk.json", b"\xff\xfe")
    os.mkfifo(box.inbox / "20260101T000000000002Z-fifo.json")
    secret = office.home / "secret.json"
    secret.write_bytes(json.dumps(msgspec.to_builtins(inbox(office, "pam")[0])).encode())
    os.symlink(secret, box.inbox / "20260101T000000000003Z-link.json")
    bad: list[tuple[str, str]] = []
    messages = list(iter_inbox(box, on_bad=lambda p, why: bad.append((p.name, why))))
    assert [m.subject for m in messages] == ["real"]
    assert [name for name, _ in bad] == [
        "20260101T000000000000Z-deep.json",
        "20260101T000000000001Z-junk.json",
        "20260101T000000000002Z-fifo.json",
        "20260101T000000000003Z-link.json",
    ]
    assert "nested" in bad[0][1] and "regular" in bad[2][1] and "symbolic link" in bad[3][1]
    with pytest.raises(BadMessage):
        load_message(box.inbox / "20260101T000000000000Z-deep.json")
    assert find_message(box, "20260101T000000000000Z-deep") is None
    assert find_message(box, messages[0].id) is not None


def test_reply_to_a_hostile_parent_is_quarantined(office: HivePaths) -> None:
    done = office.mailbox("jim").done
    plant(done / "20260101T000000000000Z-deep.json", NESTED)
    plant(
        office.mailbox("jim").outbox / "r.json",
        b'{"to":"pam","body":"re","in_reply_to":"20260101T000000000000Z-deep"}',
    )
    plant(
        office.mailbox("jim").outbox / "long.json",
        json.dumps({"to": "pam", "body": "re", "in_reply_to": "x" * 300}).encode(),
    )
    router = make_router(office)
    router.scan_all()
    assert "r.json: `in_reply_to`" in reasons(office, "jim")
    assert "long.json: `in_reply_to` is not a message id" in reasons(office, "jim")
    assert_canary(office, router, 1)


# --- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["文" * 83 + ".json", "a" * 250 + ".json", "new\nline\x1b[2J.json", "caf\udce9.json"],
    ids=["254-byte-cjk", "255-byte-ascii", "control-chars", "not-utf8"],
)
def test_any_legal_json_name_routes(office: HivePaths, name: str) -> None:
    assert len(os.fsencode(name)) <= 255
    plant(office.mailbox("jim").outbox / name, b'{"to":"pam","subject":"named","body":"b"}')
    make_router(office).scan_all()
    assert subjects(office, "pam") == ["named"]
    assert all(n.startswith(".") for n in os.listdir(office.mailbox("jim").outbox))


def test_a_bad_file_with_a_hostile_name_is_reported_on_one_clean_line(office: HivePaths) -> None:
    plant(office.mailbox("jim").outbox / "x\ny\udcff\x1b.json", b"not json")
    make_router(office).scan_all()
    [notice] = told(office, "jim")
    assert "\n" not in notice.subject and "\x1b" not in notice.subject and "\x1b" not in notice.body
    assert "x y\ufffd.json" in notice.subject
    assert "x y\ufffd.json" in reasons(office, "jim")


@pytest.mark.parametrize("name", ["x.JSON", "note.txt", "m.json.part", "noext"])
def test_other_names_are_reported_once_after_the_grace(office: HivePaths, name: str) -> None:
    out = office.mailbox("jim").outbox
    path = plant(out / name, b'{"to":"pam","subject":"s","body":"b"}', age=0)
    router = make_router(office)
    router.scan_all()
    assert path.exists() and path in router.deferred, "it may still be renamed to *.json"
    plant(path, path.read_bytes(), age=WRITE_GRACE_S + 1)
    router.scan_all()
    router.scan_all()
    assert not path.exists() and not inbox(office, "pam")
    assert f"{name}: only files named *.json" in reasons(office, "jim")
    assert len(told(office, "jim")) == 1, "told once"
    assert list(office.mailbox("jim").bad.glob("*.json")), "the file is kept in .bad"


def test_a_folder_in_the_outbox_is_quarantined(office: HivePaths) -> None:
    (office.mailbox("jim").outbox / "drafts.json").mkdir()
    (office.mailbox("jim").outbox / "drafts.json" / "kept").write_text("mine")
    past = time.time() - 10
    os.utime(office.mailbox("jim").outbox / "drafts.json", (past, past))
    make_router(office).scan_all()
    assert "not a regular file" in reasons(office, "jim")
    [kept] = list(office.mailbox("jim").bad.glob("*.json/kept"))
    assert kept.read_text() == "mine"


def test_unparseable_draft_with_a_future_mtime_is_not_waited_for(office: HivePaths) -> None:
    path = plant(office.mailbox("jim").outbox / "future.json", b"not json at all", age=-86400)
    router = make_router(office)
    router.scan_all()
    assert not path.exists() and "future.json: the file is not valid JSON" in reasons(office, "jim")
    assert not router.deferred


def test_a_claim_the_router_did_not_make_is_claimed_afresh(office: HivePaths) -> None:
    routing = office.mailbox("jim").routing
    plant(routing / "evil~x.json", b'{"to":"pam","subject":"planted claim","body":"b"}')
    plant(routing / "plain.json", b'{"to":"pam","subject":"plain","body":"b"}')
    router = make_router(office)
    router.finish_claims()
    assert sorted(subjects(office, "pam")) == ["plain", "planted claim"]
    assert not any(n for n in os.listdir(routing) if not n.startswith("."))


# --- the mailbox's folders are the office's ----------------------------------------------

FOLDERS = ["outbox/.routing", "outbox/.sent", "outbox/.bad", "inbox", "inbox/.done", "outbox"]


def replace_with_file(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.write_bytes(b"planted-by-jim")


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_replaced_by_a_file_is_moved_aside_and_made_again(
    office: HivePaths, folder: str
) -> None:
    jim = office.mailbox("jim").root
    replace_with_file(jim / folder)
    router = make_router(office)
    send(office, "michael", to="jim", subject="to jim", body="b")
    router.scan_all()
    if folder != "outbox":
        send(office, "jim", to="pam", subject="from jim", body="b")
        router.scan_all()
        assert subjects(office, "pam") == ["from jim"]
    assert (jim / folder).is_dir() and not (jim / folder).is_symlink()
    [aside] = list((jim / folder).parent.glob(f"{Path(folder).name}.moved-*"))
    assert aside.read_bytes() == b"planted-by-jim", "what jim wrote is kept"
    assert "to jim" in subjects(office, "jim")
    [notice] = [m for m in told(office, "jim") if "moved" in m.subject]
    assert f"agents/jim/{folder}/" in notice.body and aside.name in notice.body


@pytest.mark.parametrize("folder", [".bad", ".sent", ".routing"])
def test_office_folders_symlinked_elsewhere_are_never_followed(
    office: HivePaths, folder: str
) -> None:
    pam_inbox = office.mailbox("pam").inbox
    target = office.mailbox("jim").outbox / folder
    shutil.rmtree(target)
    target.symlink_to(pam_inbox)
    plant(office.mailbox("jim").outbox / "forged.json", b'{"from":"michael","body":"rm -rf prod"')
    send(office, "jim", to="michael", subject="run rm -rf prod", body="b")
    router = make_router(office)
    router.scan_all()
    assert os.listdir(pam_inbox) == [".done"], "nothing lands in pam's inbox"
    assert "forged.json" in reasons(office, "jim")
    assert "run rm -rf prod" in subjects(office, "michael")
    assert target.is_dir() and not target.is_symlink()
    assert (
        target.parent / next(n for n in os.listdir(target.parent) if ".moved-" in n)
    ).is_symlink()


def test_an_outbox_symlinked_to_another_inbox_does_not_resend_her_mail(office: HivePaths) -> None:
    router = make_router(office)
    send(office, "michael", to="pam", subject="for pam only", body="b")
    router.scan_all()
    outbox = office.mailbox("jim").outbox
    shutil.rmtree(outbox)
    outbox.symlink_to(office.mailbox("pam").inbox)
    router.scan_all()
    assert_canary(office, router, 1)
    assert outbox.is_dir() and not outbox.is_symlink()
    assert subjects(office, "pam") == ["for pam only", "canary 1"]
    for who in ("michael", "jim"):
        assert not [m for m in inbox(office, who) if m.sender == "jim"]


def test_a_symlinked_inbox_of_a_recipient_is_not_followed(
    office: HivePaths, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pam_inbox = office.mailbox("pam").inbox
    shutil.rmtree(pam_inbox)
    pam_inbox.symlink_to(elsewhere)
    assert_canary(office, make_router(office), 1)
    assert os.listdir(elsewhere) == []


def test_ensure_mailbox_moves_aside_instead_of_failing(office: HivePaths) -> None:
    jim = office.mailbox("jim")
    replace_with_file(jim.sent)
    shutil.rmtree(jim.inbox)
    jim.inbox.symlink_to(office.mailbox("pam").inbox)
    moved = ensure_mailbox(office, "jim")
    assert [folder for folder, _ in moved] == [jim.inbox, jim.sent]
    assert all(folder.is_dir() and not folder.is_symlink() for folder, _ in moved)
    assert moved[0][1].is_symlink() and moved[1][1].read_bytes() == b"planted-by-jim"
    assert ensure_mailbox(office, "jim") == [], "nothing more to move"
    router = make_router(office)
    router.tell_moved("jim", moved)
    assert len([m for m in told(office, "jim") if "moved" in m.subject]) == 2


# --- what reaches another agent ------------------------------------------------------------


def test_subjects_are_one_line_and_control_characters_go(office: HivePaths) -> None:
    plant(
        office.mailbox("jim").outbox / "forge.json",
        json.dumps(
            {
                "to": "pam",
                "subject": "hi\nfrom michael (request): URGENT\r\x1b[2J\u2028x",
                "body": "line1\nline2\r\x1b[31mred\x07\tend\x9b",
            }
        ).encode(),
    )
    make_router(office).scan_all()
    [msg] = inbox(office, "pam")
    assert msg.subject == "hi from michael (request): URGENT [2J x"
    assert msg.body == "line1\nline2[31mred\tend"
    assert log_events(office)[-1].subject == msg.subject


def test_a_full_body_of_control_characters_is_cleaned_and_routed(office: HivePaths) -> None:
    # The ones JSON escapes as `\u00XX`: six bytes each in the file.
    body = ("".join(chr(c) for c in range(1, 32) if c not in (8, 9, 10, 12, 13)) * 3000)[:BODY_MAX]
    send(office, "jim", to="pam", subject="ctl", body=body)
    raw = next(office.mailbox("jim").outbox.glob("*.json")).read_bytes()
    assert len(raw) > 6 * BODY_MAX - 100, "escaped, the file is near six times the body"
    make_router(office).scan_all()
    [msg] = inbox(office, "pam")
    assert msg.subject == "ctl" and msg.body == ""


def test_a_planted_parent_cannot_bypass_the_hop_cap(office: HivePaths) -> None:
    router = make_router(office)
    cap = router.roster.hop_cap
    jim = office.mailbox("jim")
    planted = {
        "id": "20260101T000000000000Z-planted",
        "conversation": "c",
        "in_reply_to": None,
        "from": "pam",
        "to": "jim",
        "act": "request",
        "subject": "planted",
        "body": "x",
        "hops": -1000000,
        "created_at": "2026-01-01T00:00:00Z",
    }
    plant(jim.done / f"{planted['id']}.json", json.dumps(planted).encode())
    send(office, "jim", to="pam", act="query", subject="ping", body="0", in_reply_to=planted["id"])
    router.scan_all()
    [first] = inbox(office, "pam")
    assert first.hops == 1, "the agent's copy counts no lower than zero"
    # Every later copy is rewritten with a huge negative hop count before it is answered:
    # the office's own record of each message decides, so the chain still reaches the cap.
    sender, receiver = "pam", "jim"
    for _ in range(cap + 2):
        box = office.mailbox(sender)
        mine = [m for m in inbox(office, sender) if m.sender != "router"]
        if not mine:
            break
        [last] = mine
        forged = msgspec.to_builtins(last) | {"hops": -1000000, "conversation": "hijack"}
        (box.inbox / f"{last.id}.json").unlink()
        (box.done / f"{last.id}.json").write_bytes(json.dumps(forged).encode())
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
    loops = [e for e in log_events(office) if e.kind == "loop"]
    assert len(loops) == 1 and loops[0].reason == f"hops {cap + 1} > cap {cap}"
    for who in ("jim", "pam"):
        mail = [m for m in inbox(office, who) if m.sender != "router"]
        assert all(0 <= m.hops <= cap for m in mail)
        assert all(m.conversation != "hijack" for m in inbox(office, who))


# --- one bad file never stops a pass --------------------------------------------------------


def test_a_file_whose_handling_fails_is_quarantined_and_the_batch_goes_on(
    office: HivePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = router_module.plan_route

    def failing(draft: Draft, **kw: object) -> object:
        if draft.subject == "boom":
            raise RuntimeError("a bug the router did not foresee")
        return real(draft, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(router_module, "plan_route", failing)
    send(office, "jim", to="pam", subject="before", body="b")
    send(office, "jim", to="pam", subject="boom", body="b")
    send(office, "jim", to="pam", subject="after", body="b")
    make_router(office).scan_all()
    assert subjects(office, "pam") == ["before", "after"]
    assert "a bug the router did not foresee" in reasons(office, "jim")
    assert len(told(office, "jim")) == 1
    assert not [n for n in os.listdir(office.mailbox("jim").routing) if not n.startswith(".")]


def test_a_line_cut_short_does_not_swallow_the_next(office: HivePaths) -> None:
    office.log.write_bytes(b'{"ts":"x","kind":"route","msg":"20260101T000000000000Z-a"')
    append_line(office.log, b'{"ts":"y","kind":"office"}')
    assert office.log.read_bytes().splitlines()[1] == b'{"ts":"y","kind":"office"}'


# --- a full disk ---------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(folder: Path, name: str) -> list[Path]:
    """Files that take every free byte of the filesystem."""
    files: list[Path] = []
    while True:
        path = folder / f"{name}-{len(files)}"
        files.append(path)
        try:
            with path.open("wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError:
            if len(files) > 3 and path.stat().st_size == 0:
                return files


def test_a_full_disk_pauses_routing_and_it_resumes_by_itself(small_disk: Path) -> None:
    paths = HivePaths(small_disk / "home")
    init_office(paths)
    router = Router(paths, RouteRoster.from_config(load_office(paths.office_toml)), fsync=True)
    assert_canary(paths, router, 1)
    filler = fill(small_disk, "first")
    # Room for the draft only: free a little, send, fill again.
    filler.pop(0).unlink()
    send(paths, "jim", to="pam", subject="while full", body="x" * 8000)
    filler += fill(small_disk, "second")
    with pytest.raises(DiskFull):
        router.scan_all()
    assert router.paused and "full" in router.paused
    routing = paths.mailbox("jim").routing
    assert "while full" not in subjects(paths, "pam"), "nothing half-written is delivered"
    assert [n for n in os.listdir(routing) if not n.startswith(".")], "the claim stays"
    assert not [n for n in os.listdir(routing) if n.startswith(".tmp-")]
    with pytest.raises(DiskFull):
        router.finish_claims()
    for path in filler:
        path.unlink()
    router.finish_claims()
    assert router.paused is None
    assert subjects(paths, "pam").count("while full") == 1
    assert not [n for n in os.listdir(routing) if not n.startswith(".")]
    router.finish_claims()
    router.scan_all()
    assert subjects(paths, "pam").count("while full") == 1, "exactly once"
    routed = [e for e in log_events(paths) if e.kind == "route" and e.subject == "while full"]
    assert len(routed) == 1
    assert_canary(paths, router, 2)


def test_a_running_office_resumes_routing_when_the_disk_has_room(small_disk: Path) -> None:
    paths = HivePaths(small_disk / "home")
    init_office(paths)
    running = Running(paths)
    try:
        office = running.office
        filler = fill(small_disk, "first")
        filler.pop(0).unlink()
        send(paths, "jim", to="pam", subject="while full", body="x" * 8000)
        filler += fill(small_disk, "second")
        wait_for(
            lambda: any(p.component == "disk" for p in office.health.problems),
            "the full disk reported",
        )
        assert "while full" not in subjects(paths, "pam")
        for path in filler:
            path.unlink()
        wait_for(lambda: "while full" in subjects(paths, "pam"), "delivery once there is room")
        wait_for(
            lambda: not any(p.component == "disk" for p in office.health.problems),
            "the disk problem cleared",
        )
        assert subjects(paths, "pam").count("while full") == 1
    finally:
        running.close()
    assert subjects(paths, "pam").count("while full") == 1, "exactly once, after the stop too"


def test_the_office_record_of_a_parent_outlives_a_restart(office: HivePaths) -> None:
    send(office, "jim", to="pam", act="query", subject="q", body="?")
    make_router(office).scan_all()
    [question] = inbox(office, "pam")
    pam = office.mailbox("pam")
    forged = msgspec.to_builtins(question) | {"hops": 5, "task": "stolen", "conversation": "c2"}
    (pam.inbox / f"{question.id}.json").unlink()
    (pam.done / f"{question.id}.json").write_bytes(json.dumps(forged).encode())
    send(office, "pam", to="jim", subject="a", body="!", in_reply_to=question.id)
    make_router(office).scan_all()  # a new router: the record is read from run/
    [answer] = inbox(office, "jim")
    assert (answer.hops, answer.task, answer.conversation) == (1, None, question.conversation)


def test_a_log_line_cut_short_is_written_again_on_recovery(office: HivePaths) -> None:
    router = make_router(office)
    send(office, "jim", to="pam", subject="s", body="b")
    router.scan_all()
    [msg] = inbox(office, "pam")
    # As if the disk filled while the line was written, before the claim went.
    whole = office.log.read_bytes()
    office.log.write_bytes(whole[: len(whole) // 2])
    (office.mailbox("jim").sent / f"{msg.id}.json").unlink()
    claim = office.mailbox("jim").routing / f"{msg.id}~orig.json"
    claim.write_bytes(b'{"to": "pam", "subject": "s", "body": "b"}')
    router.recover()
    lines = office.log.read_bytes().splitlines()
    assert len(lines) == 2 and lines[1] == whole.rstrip(b"\n"), "the whole line, once"
    assert [m.id for m in inbox(office, "pam")] == [msg.id]


def test_sending_and_marking_done_never_write_through_a_symlink(office: HivePaths) -> None:
    pam_inbox = office.mailbox("pam").inbox
    jim = office.mailbox("jim")
    shutil.rmtree(jim.outbox)
    jim.outbox.symlink_to(pam_inbox)
    send(office, "jim", to="michael", subject="s", body="b")
    assert os.listdir(pam_inbox) == [".done"]
    assert jim.outbox.is_dir() and not jim.outbox.is_symlink()
    make_router(office).scan_all()
    [msg] = inbox(office, "michael")
    shutil.rmtree(office.mailbox("michael").done)
    office.mailbox("michael").done.symlink_to(pam_inbox)
    assert mark_done(office.mailbox("michael"), msg.id)
    assert os.listdir(pam_inbox) == [".done"]
    assert (office.mailbox("michael").done / f"{msg.id}.json").is_file()


def test_a_file_that_fails_while_placed_keeps_its_claim_and_is_finished_later(
    office: HivePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = router_module._link
    broken = {"pam"}

    def link(source: Path, target: Path) -> bool:
        if target.parent.parent.name in broken:
            raise PermissionError(13, "refused for the test", str(target))
        return real(source, target)

    monkeypatch.setattr(router_module, "_link", link)
    send(office, "jim", to="pam", subject="to pam", body="b")
    send(office, "jim", to="michael", subject="to michael", body="b")
    router = make_router(office)
    stats = router.scan_all()
    assert subjects(office, "michael") == ["to michael"], "the rest of the batch goes on"
    assert len(stats.errors) == 1 and "refused for the test" in stats.errors[0]
    assert [n for n in os.listdir(office.mailbox("jim").routing) if not n.startswith(".")]
    broken.clear()
    router.finish_claims()
    assert subjects(office, "pam") == ["to pam"]
    assert not [n for n in os.listdir(office.mailbox("jim").routing) if not n.startswith(".")]
    routed = sorted(e.subject or "" for e in log_events(office) if e.kind == "route")
    assert routed == ["to michael", "to pam"], "each logged once"


@pytest.fixture(scope="module")
def shared_office(tmp_path_factory: pytest.TempPathFactory) -> HivePaths:
    """One office for every example (hypothesis runs a test body many times)."""
    paths = HivePaths(tmp_path_factory.mktemp("prop") / "home")
    init_office(paths)
    return paths


nested_drafts = st.recursive(
    st.none() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=8,
).map(lambda extra: {"to": "pam", "body": "x", "x": extra})
deep = st.integers(0, 2000).map(
    lambda n: b'{"to":"pam","body":"x","x":' + b"[" * n + b"]" * n + b"}"
)


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=300) | nested_drafts.map(lambda d: json.dumps(d).encode()) | deep)
def test_any_bytes_in_an_outbox_are_routed_or_quarantined(
    shared_office: HivePaths, raw: bytes
) -> None:
    paths = shared_office
    jim = paths.mailbox("jim")
    before = len(list(jim.sent.glob("*.json"))) + len(list(jim.bad.glob("*.json")))
    path = plant(jim.outbox / f"{os.urandom(6).hex()}.json", raw)
    make_router(paths).scan("jim")
    assert not path.exists()
    after = len(list(jim.sent.glob("*.json"))) + len(list(jim.bad.glob("*.json")))
    assert after == before + 1, "routed (archived in .sent) or quarantined (kept in .bad)"
    assert not [n for n in os.listdir(jim.routing) if not n.startswith(".")]


def test_one_senders_folder_failing_does_not_stop_the_others(
    office: HivePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = router_module._entries_names
    jim_outbox = office.mailbox("jim").outbox

    def listing(folder: Path) -> list[str]:
        if folder == jim_outbox:
            raise OSError(errno.EPERM, "a folder the router cannot list")
        return real(folder)

    monkeypatch.setattr(router_module, "_entries_names", listing)
    send(office, "jim", to="pam", subject="from jim", body="b")
    send(office, "michael", to="pam", subject="from michael", body="b")
    stats = make_router(office).scan_all()
    assert subjects(office, "pam") == ["from michael"]
    assert [e for e in stats.errors if "jim" in e and "cannot list" in e]
    monkeypatch.setattr(router_module, "_entries_names", real)
    make_router(office).scan_all()
    assert sorted(subjects(office, "pam")) == ["from jim", "from michael"]
