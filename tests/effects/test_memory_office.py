"""Memory kept by a running office: mail is indexed as it is routed, memory.md reaches the
agent at SessionStart, and notes are folded when the agent goes idle."""

from __future__ import annotations

import json

from hive_core.mail import write_draft
from hive_core.memory import open_store
from hive_core.schema import Draft
from tests.conftest import Running
from tests.effects.test_hook_server import hook
from tests.support import wait_for


def test_routed_mail_is_searchable_by_its_parties_only(running: Running) -> None:
    paths = running.office.paths
    write_draft(
        paths.mailbox("pam"),
        Draft(to="jim", subject="flaky", body="the xylophone_cache test is flaky"),
    )
    running.office.router.scan_all()

    def found(caller: str) -> bool:
        with open_store(paths) as store:
            return any(
                "xylophone_cache" in h.entry.text for h in store.search("xylophone", caller=caller)
            )

    wait_for(
        lambda: found("jim") and found("pam"), "the message indexed for its sender and recipient"
    )
    assert not found("michael") and not found("pete")


def test_memory_md_is_given_at_session_start(running: Running) -> None:
    paths = running.office.paths
    paths.mailbox("jim").memory.write_text(
        "# Memory of jim\n\n- the staging DB is read-only on Fridays\n"
    )
    out = hook(running, "jim", {"hook_event_name": "SessionStart", "session_id": "s-1"})
    context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "staging DB is read-only on Fridays" in context


def test_notes_are_folded_when_the_agent_goes_idle(running: Running) -> None:
    paths = running.office.paths
    box = paths.mailbox("pete")
    box.notes.write_text("- the vendor API allows 10 requests per second\n")
    # By rule here: the CLI path has its own tests against the scripted model.
    running.office.memory.use_cli = False
    hook(running, "pete", {"hook_event_name": "Stop", "stop_hook_active": False})
    wait_for(
        lambda: (
            "10 requests per second" in box.memory.read_text()
            and "10 requests per second" not in box.notes.read_text()
        ),
        "the note folded into memory.md",
    )
    assert (box.root / "memory" / "changes.md").read_text().count("added") >= 1
