"""The person's answer to an agent's question reaches the agent that asked (and the
manager), once each, in the question's thread: a real `hive-office serve`, the agent's
question sent with the real `hive send --needs-human`, the answer given with the real
`hive-office answer`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hive_core.hive import init_office
from hive_core.paths import HivePaths
from tests.serve_support import ServedOffice, served
from tests.support import wait_for


def inbox(office: ServedOffice, agent: str) -> list[dict[str, Any]]:
    out = office.run("hive", "inbox", "--json", agent=agent)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def ask(office: ServedOffice, asker: str, to: str, subject: str) -> dict[str, Any]:
    """`asker` asks with `hive send --needs-human`; the question as the person sees it."""
    sent = office.run(
        "hive", "send", "--to", to, "--act", "query", "--subject", subject,
        "--body", "Postgres or SQLite?", "--needs-human", agent=asker,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr

    def waiting() -> dict[str, Any] | None:
        listed = office.run("hive-office", "escalations", "--json")
        return next((e for e in json.loads(listed.stdout) if e["subject"] == subject), None)

    return wait_for(waiting, f"{subject!r} waiting for the person")


def answers(office: ServedOffice, agent: str, subject: str) -> list[dict[str, Any]]:
    return [m for m in inbox(office, agent) if m["subject"] == f"Answer: {subject}"]


def home(tmp_path: Path) -> Path:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    return paths.home


def test_an_answer_to_a_question_flagged_to_the_manager_reaches_the_asker(
    tmp_path: Path,
) -> None:
    with served(home(tmp_path), agents=False) as office:
        question = ask(office, "jim", "god", "Which DB?")
        [asked] = [m for m in inbox(office, "michael") if m["id"] == question["id"]]

        done = office.run("hive-office", "answer", question["id"], "SQLite, for now.")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            f"Your answer to {question['id']} went to jim and michael (the manager)."
        )

        to_jim = wait_for(lambda: answers(office, "jim", "Which DB?"), "the answer in jim's inbox")
        to_michael = wait_for(
            lambda: answers(office, "michael", "Which DB?"), "the answer in michael's inbox"
        )
        for answer in (*to_jim, *to_michael):
            assert answer["from"] == "human"
            assert answer["conversation"] == asked["conversation"]
            assert answer["body"].startswith("SQLite, for now.")
            assert question["id"] in answer["body"]  # it says which question it answers
        # Once each, and nobody else heard it: the person sent two answers, both routed.
        assert (len(to_jim), len(to_michael)) == (1, 1)
        sent = HivePaths(office.home).mailbox("human").sent
        assert sorted(json.loads(p.read_text())["to"] for p in sent.glob("*.json")) == [
            "jim",
            "michael",
        ]
        assert answers(office, "pam", "Which DB?") == []
        listed = office.run("hive-office", "escalations", "--json")
        assert question["id"] not in listed.stdout


def test_an_answer_to_a_question_asked_of_the_person_is_a_reply_to_both(tmp_path: Path) -> None:
    with served(home(tmp_path), agents=False) as office:
        question = ask(office, "jim", "human", "Ship Friday?")

        done = office.run("hive-office", "answer", question["id"], "Yes.")
        assert done.returncode == 0, done.stderr
        assert "went to jim and michael (the manager)." in done.stdout

        [to_jim] = wait_for(lambda: answers(office, "jim", "Ship Friday?"), "jim's answer")
        [to_michael] = wait_for(lambda: answers(office, "michael", "Ship Friday?"), "michael's")
        for answer in (to_jim, to_michael):
            assert answer["in_reply_to"] == question["id"]
            assert answer["body"] == "Yes."
        assert to_jim["conversation"] == to_michael["conversation"]
        # jim can answer back in the same thread, as to any reply it got.
        back = office.run("hive", "reply", to_jim["id"], "--body", "Thanks.", agent="jim")
        assert back.returncode == 0, back.stderr


def test_the_managers_own_question_is_answered_to_the_manager_once(tmp_path: Path) -> None:
    with served(home(tmp_path), agents=False) as office:
        question = ask(office, "michael", "human", "Hire a tester?")

        done = office.run("hive-office", "answer", question["id"], "Not yet.")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            f"Your answer to {question['id']} went to michael (the manager)."
        )
        [answer] = wait_for(
            lambda: answers(office, "michael", "Hire a tester?"), "the manager's answer"
        )
        assert answer["in_reply_to"] == question["id"]
