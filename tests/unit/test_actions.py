"""The person's actions (hive_core/actions.py) through Person.perform, on a real office
reached over its control socket, and the CLI verbs generated from the same table."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from click.testing import CliRunner

from hive_core import control
from hive_core.actions import ACTIONS, Escalation
from hive_core.cli.office import cli
from hive_core.kick import kick
from hive_core.mail import iter_inbox, write_draft
from hive_core.office.person import Person
from hive_core.schema import HUMAN, ControlRequest, Draft
from tests.conftest import Running
from tests.support import wait_for


def ask(running: Running, **fields: Any) -> control.ControlReply:
    return control.request(running.office.paths.control_socket, ControlRequest(**fields))


def test_every_agent_action_has_its_one_handler() -> None:
    agent_actions = {a.name for a in ACTIONS if a.target == "agent"}
    assert set(Person._on_agent) == agent_actions


def test_every_action_is_a_hive_office_verb_with_the_tables_help() -> None:
    for action in ACTIONS:
        command = cli.commands[action.name]
        assert command.help == action.help, action.name
    assert CliRunner().invoke(cli, ["answer", "--help"]).exit_code == 0


def test_agent_actions_say_their_sentence_and_refuse_an_unknown_agent(running: Running) -> None:
    reply = ask(running, cmd="halt", agent="jim")
    assert reply.ok and reply.detail == "jim will stop at its next hook."
    assert running.office.states["jim"].halted
    reply = ask(running, cmd="resume", agent="jim")
    assert reply.ok and not running.office.states["jim"].halted
    refused = ask(running, cmd="pause", agent="toby")
    assert not refused.ok and refused.error and "no agent 'toby'" in refused.error
    status = ask(running, cmd="status")
    assert status.ok and status.detail
    assert {a["id"] for a in json.loads(status.detail)["agents"]} >= {"jim", "michael"}


def test_escalations_are_listed_and_answered(running: Running) -> None:
    paths = running.office.paths
    write_draft(
        paths.mailbox("jim"),
        Draft(to=HUMAN, subject="Which database?", body="Postgres or SQLite?", needs_human=True),
    )
    kick(paths, "jim")
    wait_for(lambda: list(iter_inbox(paths.mailbox(HUMAN))), "the question in the person's inbox")

    listed = ask(running, cmd="escalations")
    assert listed.ok and listed.detail
    escalations = msgspec.json.decode(listed.detail, type=list[Escalation])
    question = next(e for e in escalations if e.subject == "Which database?")
    assert question.sender == "jim" and question.needs_human
    assert json.loads(listed.detail)[0]["from"] == "jim"

    missing = ask(running, cmd="answer", message="20260101T000000Z-nothing", text="SQLite")
    assert not missing.ok and missing.error and "waits for you" in missing.error
    empty = ask(running, cmd="answer", message=question.id, text="  ")
    assert not empty.ok and empty.error and "empty" in empty.error

    answered = ask(running, cmd="answer", message=question.id, text="SQLite, for now.")
    assert answered.ok and answered.detail == (
        f"Your answer to {question.id} went to jim and michael (the manager)."
    )
    manager = paths.mailbox(running.office.config.office.manager)
    answer = wait_for(
        lambda: [m for m in iter_inbox(manager) if m.in_reply_to == question.id],
        "the answer in the manager's inbox",
    )[0]
    assert answer.sender == HUMAN and answer.body == "SQLite, for now."
    after = ask(running, cmd="escalations")
    assert after.detail is not None and question.id not in after.detail


def test_the_verbs_reach_the_office(running: Running) -> None:
    paths = running.office.paths
    home = ["--home", str(paths.home)]
    write_draft(
        paths.mailbox("jim"),
        Draft(to="michael", subject="Ship \x1b[31mFriday?", body="", needs_human=True),
    )
    kick(paths, "jim")
    manager = paths.mailbox("michael")
    flagged = wait_for(lambda: list(iter_inbox(manager)), "the flagged mail in michael's inbox")[0]

    runner = CliRunner()
    listed = runner.invoke(cli, ["escalations", *home])
    assert listed.exit_code == 0 and flagged.id in listed.output
    assert "\x1b" not in listed.output and "[needs human]" in listed.output
    as_json = runner.invoke(cli, ["escalations", "--json", *home])
    assert json.loads(as_json.output)[0]["id"] == flagged.id

    refused = runner.invoke(cli, ["answer", *home, "no-such-message", "yes"])
    assert refused.exit_code == 1 and "waits for you" in refused.output
    answered = runner.invoke(cli, ["answer", *home, flagged.id, "Yes, ship it."])
    assert answered.exit_code == 0, answered.output
    assert answered.output.strip() == (
        f"Your answer to {flagged.id} went to jim and michael (the manager)."
    )
    halted = runner.invoke(cli, ["halt", *home, "jim"])
    assert halted.exit_code == 0 and halted.output.strip() == "jim will stop at its next hook."
