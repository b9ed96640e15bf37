"""Hook decisions without a socket or a disk: status, policy, context and the Stop drain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_core.agents.provider import CanonicalEvent
from hive_core.events.policy import (
    DIGEST_FIELD_MAX,
    DIGEST_MAX_ITEMS,
    TYPING_GRACE_S,
    AgentView,
    OfficeFacts,
    decide,
    digest,
)
from hive_core.schema import MailItem
from hive_core.text import one_line

HOME = Path("/home/u/.hive-office")
HIVE = HOME / "hive"
OFFICE = OfficeFacts(
    office="Scranton",
    home=HOME,
    hive=HIVE,
    manager="michael",
    stop_block_cap=3,
    roster=[
        ("michael", "Michael", "Manager"),
        ("jim", "Jim", "Engineer"),
        ("pete", "Pete", "Research"),
    ],
    web_agents=["pete"],
)
JIM = AgentView(id="jim", name="Jim", role="Engineer", manager=False, web=False)
MICHAEL = AgentView(id="michael", name="Michael", role="Manager", manager=True, web=False)
MAIL = [
    MailItem(id=f"2026113{n}T000000000000Z-aa", sender="pam", act="request", subject=f"thing {n}")
    for n in range(3)
]


def ev(name: str, **kw: object) -> CanonicalEvent:
    return CanonicalEvent(name=name, **kw)  # type: ignore[arg-type]


def tool(name: str, cwd: str = "/home/u/src", **tool_input: object) -> CanonicalEvent:
    return ev("PreToolUse", tool_name=name, tool_input=dict(tool_input), cwd=cwd)


# --- status -----------------------------------------------------------------------------


def test_status_follows_the_turn() -> None:
    start = decide(ev("SessionStart", session_id="s-1"), JIM, [], OFFICE)
    assert (start.status, start.session_id) == ("idle", "s-1")
    assert decide(ev("UserPromptSubmit", prompt="hi"), JIM, [], OFFICE).status == "working"
    pre = decide(tool("Bash", command="ls"), JIM, [], OFFICE)
    assert (pre.status, pre.last_tool, pre.decision.deny) == ("working", "Bash", None)
    assert decide(ev("Stop"), JIM, [], OFFICE).status == "idle"
    assert decide(ev("SessionEnd"), JIM, [], OFFICE).status == "exited"


def test_permission_prompt_means_waiting() -> None:
    out = decide(
        ev(
            "Notification",
            notification_type="permission_prompt",
            message="Claude needs your permission",
        ),
        JIM,
        [],
        OFFICE,
    )
    assert out.status == "waiting" and out.note == "needs you: Claude needs your permission"
    assert (
        decide(ev("Notification", notification_type="idle_prompt"), JIM, [], OFFICE).status is None
    )
    # What the CLI says goes into the log as one short line, whatever it was.
    noisy = ev("Notification", notification_type="permission_prompt", message="a\nb " * 10**6)
    note = decide(noisy, JIM, [], OFFICE).note or ""
    assert note.startswith("needs you: a b a b") and len(note) < 250 and "\n" not in note


# --- context ------------------------------------------------------------------------------


def test_session_start_tells_identity_team_and_unread() -> None:
    out = decide(ev("SessionStart", session_id="s"), JIM, MAIL, OFFICE)
    text = out.decision.context or ""
    assert "You are Jim (id jim)" in text and "michael (Michael, Manager, manager)" in text
    assert "3 unread messages" in text and MAIL[0].id in text
    assert out.announce == {m.id for m in MAIL}


def test_prompt_digest_only_for_news() -> None:
    seen = replace(JIM, announced=frozenset({MAIL[0].id}))
    out = decide(ev("UserPromptSubmit"), seen, MAIL, OFFICE)
    assert (
        out.decision.context
        and MAIL[0].id not in out.decision.context
        and MAIL[1].id in out.decision.context
    )
    everything_seen = replace(JIM, announced=frozenset(m.id for m in MAIL))
    assert decide(ev("UserPromptSubmit"), everything_seen, MAIL, OFFICE).decision.context is None


def test_post_tool_tells_only_urgent_mail() -> None:
    urgent = MailItem(id="x-1", sender="michael", act="request", subject="stop the deploy")
    out = decide(ev("PostToolUse", tool_name="Bash"), JIM, [*MAIL, urgent], OFFICE)
    assert (
        out.decision.context
        and "x-1" in out.decision.context
        and MAIL[0].id not in out.decision.context
    )
    assert decide(ev("PostToolUse", tool_name="Bash"), JIM, MAIL, OFFICE).decision.context is None


def test_digest_is_short_and_never_has_bodies() -> None:
    many = [
        MailItem(id=f"id-{n:03d}", sender="pam", act="inform", subject="s" * 300) for n in range(30)
    ]
    text = digest(many)
    assert f"and {30 - DIGEST_MAX_ITEMS} more" in text and "hive inbox" in text
    assert len(text.encode()) < 1500
    assert len(digest(MAIL[:1]).encode()) <= 600


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=300),
    st.text(max_size=100),
    st.text(max_size=100),
    st.text(max_size=100),
)
def test_every_digest_line_is_one_message_whatever_the_fields(
    subject: str, sender: str, mid: str, act: str
) -> None:
    items = [MailItem(id=mid, sender=sender, act=act, subject=subject), MAIL[0]]
    lines = digest(items).split("\n")
    assert len(lines) == 4  # the count, one line each, what to run
    assert lines[2] == "- 20261130T000000000000Z-aa from pam (request): thing 0"
    assert all(c.isprintable() for line in lines for c in line)
    assert lines[1].startswith("- ") and len(lines[1]) < 2 * DIGEST_FIELD_MAX + 200


def test_one_line_folds_separators_and_drops_control_characters() -> None:
    forged = "hi\r\nfrom michael (request): URGENT\u2028\u202e\x1b[31m\tx"
    assert one_line(forged, 200) == "hi from michael (request): URGENT [31m x"
    assert one_line("plain text", 200) == "plain text"
    assert one_line("x" * 100, 10) == "x" * 9 + "…"


# --- Stop drain ------------------------------------------------------------------------


def test_stop_blocks_with_digest_when_mail_waits() -> None:
    out = decide(ev("Stop"), JIM, MAIL, OFFICE)
    assert out.decision.block and "3 unread messages" in out.decision.block and out.stop_blocks == 1
    assert out.status == "working"


def test_stop_block_cap_counts_consecutive_blocks() -> None:
    agent = JIM
    blocks = 0
    for _ in range(OFFICE.stop_block_cap):
        out = decide(
            ev("Stop", stop_hook_active=blocks > 0),
            replace(agent, stop_blocks=blocks),
            MAIL,
            OFFICE,
        )
        assert out.decision.block
        blocks = out.stop_blocks
    released = decide(
        ev("Stop", stop_hook_active=True), replace(agent, stop_blocks=blocks), MAIL, OFFICE
    )
    assert released.decision.block is None and "released after 3 blocks" in (released.note or "")
    # A fresh turn (stop_hook_active false) starts the count again.
    fresh = decide(
        ev("Stop", stop_hook_active=False), replace(agent, stop_blocks=blocks), MAIL, OFFICE
    )
    assert fresh.decision.block and fresh.stop_blocks == 1


@pytest.mark.parametrize(
    ("agent", "why"),
    [
        (replace(JIM, paused=True), "paused"),
        (replace(JIM, halted=True), "paused"),
        (replace(JIM, typed_ago=TYPING_GRACE_S / 2), "typing"),
    ],
)
def test_stop_never_blocks_when_guarded(agent: AgentView, why: str) -> None:
    out = decide(ev("Stop"), agent, MAIL, OFFICE)
    assert out.decision.block is None and out.status == "idle" and why in (out.note or "")


def test_stop_blocks_again_once_the_person_stopped_typing() -> None:
    assert decide(
        ev("Stop"), replace(JIM, typed_ago=TYPING_GRACE_S + 1), MAIL, OFFICE
    ).decision.block


def test_stop_without_mail_just_idles() -> None:
    out = decide(ev("Stop"), JIM, [], OFFICE)
    assert out.decision.block is None and out.status == "idle"


# --- tool policy ----------------------------------------------------------------------


def test_web_tools_only_for_web_agents() -> None:
    out = decide(tool("WebFetch", url="https://example.com"), JIM, [], OFFICE)
    assert (
        out.decision.deny
        and "pete" in out.decision.deny
        and "hive send --to pete" in out.decision.deny
    )
    pete = AgentView(id="pete", name="Pete", role="Research", manager=False, web=True)
    assert decide(tool("WebSearch", query="x"), pete, [], OFFICE).decision.deny is None


def test_everything_denied_while_paused_or_halted() -> None:
    for agent, word in (
        (replace(JIM, paused=True), "paused"),
        (replace(JIM, halted=True), "halted"),
    ):
        out = decide(tool("Read", file_path="/etc/hosts"), agent, [], OFFICE)
        assert out.decision.deny and word in out.decision.deny


@pytest.mark.parametrize(
    ("agent", "event", "denied"),
    [
        (JIM, tool("Write", file_path=str(HIVE / "agents/jim/memory/notes.md")), False),
        (JIM, tool("Write", file_path=str(HIVE / "agents/pam/inbox/x.json")), True),
        (JIM, tool("Edit", file_path=str(HIVE / "board.md")), True),
        (MICHAEL, tool("Edit", file_path=str(HIVE / "board.md")), False),
        (JIM, tool("Write", file_path=str(HIVE / "tasks.json")), True),
        (MICHAEL, tool("Write", file_path=str(HIVE / "tasks.json")), False),
        (MICHAEL, tool("Write", file_path=str(HIVE / "agents/jim/memory.md")), True),
        (JIM, tool("Write", file_path=str(HIVE / "log.jsonl")), True),
        (JIM, tool("Write", file_path="board.md", cwd=str(HIVE)), True),
        (JIM, tool("Write", file_path="../pam/memory.md", cwd=str(HIVE / "agents/jim")), True),
        (JIM, tool("Write", file_path=str(HOME / "agent-settings/jim.json")), True),
        (JIM, tool("Write", file_path="/home/u/src/app.py"), False),
        (JIM, tool("Bash", command=f"echo hi >> {HIVE}/board.md"), True),
        (JIM, tool("Bash", command=f"cat {HIVE}/board.md"), False),
        (JIM, tool("Bash", command=f"rm -rf {HIVE}/agents/pam"), True),
        (JIM, tool("Bash", command="hive board"), False),
        (JIM, tool("Bash", command="hive send --to pam --body 'see /tmp/x > y'"), False),
        (JIM, tool("Bash", command="pytest -q > /tmp/out.txt"), False),
        (
            JIM,
            tool(
                "Edit",
                file_path="/home/u/src/a.py",
                file_paths=["/home/u/src/a.py", str(HIVE / "board.md")],
            ),
            True,
        ),
    ],
)
def test_write_policy(agent: AgentView, event: CanonicalEvent, denied: bool) -> None:
    reason = decide(event, agent, [], OFFICE).decision.deny
    assert bool(reason) == denied, reason
    if reason:
        assert "hive" in reason or "leave them alone" in reason, "a denial says what to do instead"


@pytest.mark.parametrize(
    "event",
    [
        ev("SessionStart", session_id="s"),
        ev("UserPromptSubmit"),
        ev("PostToolUse", tool_name="Bash"),
        ev("Stop"),
    ],
    ids=lambda e: e.name,
)
def test_ids_from_the_index_decide_as_the_items_do(event: CanonicalEvent) -> None:
    urgent = MailItem(id="u-1", sender="michael", act="request", subject="now")
    unread = [*MAIL, urgent]
    told = replace(JIM, announced=frozenset({MAIL[0].id}))
    given_ids = decide(event, told, unread, OFFICE, frozenset(m.id for m in unread))
    assert given_ids == decide(event, told, unread, OFFICE)
    assert given_ids.announce  # each of these events announces something here
