"""Scripted minds for the demo: a manager and engineers that react to what the office
tells them, turn by turn, through the real CLI and the real `hive` command.

Each brain is a Scenario for the scripted Messages API whose answer depends on the
request: a prompt that mentions unread mail -> read the inbox; the inbox's JSON ->
act on each message; anything else -> end the turn. So the same brain copes with mail
arriving in any order, as many times as it arrives.
"""

from __future__ import annotations

import json
import shlex
from abc import ABC, abstractmethod
from typing import Any

from hive_core.demo.scripted_model.scenario import (
    Block,
    Request,
    Scenario,
    Text,
    Turn,
    anything,
    bash,
    last_user_texts,
)

GOAL = "Ship the CSV importer rewrite: split the parser from the loader, and port the edge cases."
# No line may start with '#': Claude Code refuses a quoted argument in which a newline
# is followed by '#' (it could hide arguments from its path checks), so the demo board
# marks its sections in bold instead of with headings.
BOARD = """**Importer rewrite**

**Goal:** ship the CSV importer rewrite without breaking the nightly sync.

**Plan**
- [ ] t1 Split the parser from the loader (jim)
- [ ] t2 Port the CSV edge cases (pam), after t1

**Notes:** the nightly job still reads the old table; keep it until the new loader is live.
"""
TASKS = [
    (
        "Split the parser from the loader",
        "jim",
        "Move parsing out of importer/load.py into importer/parse.py; keep the public API. "
        "Done when the tests pass and load.py only loads.",
    ),
    (
        "Port the CSV edge cases",
        "pam",
        "Quoted newlines, BOM, semicolon separators: port the old cases to the new parser "
        "with a test each.",
    ),
]
RESULTS = {
    "jim": "parse.py holds the parser, load.py only loads; 42 tests pass.",
    "pam": "Quoted newlines, BOM and ';' handled in parse.py, one test each; 47 tests pass.",
}


def last_tool_call(request: Request) -> tuple[str, str] | None:
    """(command, output) of the Bash call the last user message answers, if any."""
    messages = [m for m in request.get("messages") or [] if m.get("role") in ("user", "assistant")]
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return None
    results = {
        b.get("tool_use_id"): b for b in _blocks(messages[-1]) if b.get("type") == "tool_result"
    }
    for block in _blocks(messages[-2]):
        if block.get("type") == "tool_use" and block.get("id") in results:
            command = str((block.get("input") or {}).get("command", ""))
            content = results[block["id"]].get("content")
            output = (
                content
                if isinstance(content, str)
                else "".join(str(c.get("text", "")) for c in content or [] if isinstance(c, dict))
            )
            return command, output
    return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def inbox_of(output: str) -> list[dict[str, Any]]:
    """The messages in `hive inbox --json` output (the CLI may print notes around it)."""
    start = output.find("[")
    try:
        data = json.loads(output[start:]) if start >= 0 else []
    except json.JSONDecodeError:
        return []
    return [m for m in data if isinstance(m, dict)]


def _told_about_mail(request: Request) -> bool:
    text = "\n".join(last_user_texts(request))
    return "unread message" in text or "hive inbox" in text or "office just opened" in text


class Brain(Scenario, ABC):
    """Answers every main request from the request itself (see the module docstring)."""

    def __init__(self, agent: str) -> None:
        super().__init__([], fallback="Done for now.")
        self.agent = agent
        self.turns_played = 0

    def respond(self, request: Request) -> tuple[Turn, int | None]:
        if not request.get("tools"):
            return super().respond(request)
        blocks = self.think(request)
        self.turns_played += 1
        return Turn(anything, tuple(blocks), label=self.agent), None

    def think(self, request: Request) -> list[Block]:
        call = last_tool_call(request)
        if call and call[0].startswith("hive inbox"):
            return self.act_on(inbox_of(call[1]))
        if call:
            return [Text("Done for now.")]
        if _told_about_mail(request):
            return [bash("hive inbox --json", "read my mail")]
        return [Text("Ready.")]

    @abstractmethod
    def act_on(self, mail: list[dict[str, Any]]) -> list[Block]:
        """The tool calls (or text) for this batch of unread messages."""


class ManagerBrain(Brain):
    """Turns the goal into a board and two tasks; records what the engineers report."""

    def __init__(self, agent: str = "michael") -> None:
        super().__init__(agent)
        self.planned = False
        self.finished: set[str] = set()

    def act_on(self, mail: list[dict[str, Any]]) -> list[Block]:
        steps: list[str] = []
        if not self.planned and any("goal" in str(m.get("subject", "")).lower() for m in mail):
            self.planned = True
            steps.append(f"hive board --text {shlex.quote(BOARD)}")
            for title, who, spec in TASKS:
                steps.append(
                    f"hive task add {shlex.quote(title)} --assignee {who} --spec {shlex.quote(spec)}"
                )
        done_tasks = [m for m in mail if m.get("act") == "done" and m.get("task")]
        for report in done_tasks:
            steps.append(
                f"hive task done {report['task']} --result {shlex.quote(str(report.get('body', '')))}"
            )
        if done_tasks:
            self.finished |= {str(report["task"]) for report in done_tasks}
            board = BOARD
            for task in sorted(self.finished):
                board = board.replace(f"- [ ] {task} ", f"- [x] {task} ")
            steps.append(f"hive board --text {shlex.quote(board)}")
        if mail:
            # Only what was read: mail that arrived meanwhile stays unread for the next turn.
            steps.append("hive done " + " ".join(str(m["id"]) for m in mail))
        if not steps:
            return [Text("Nothing new.")]
        return [bash(" && ".join(steps), "run the floor")]


class WorkerBrain(Brain):
    """Acknowledges its task, 'does' it, reports it done, and marks its mail read. With
    `ask_person`, it first puts that question to the person (needs_human) about the task."""

    def __init__(self, agent: str, ask_person: str | None = None) -> None:
        super().__init__(agent)
        self.ask_person = ask_person

    def act_on(self, mail: list[dict[str, Any]]) -> list[Block]:
        steps: list[str] = []
        for message in mail:
            task = message.get("task")
            if message.get("act") == "request" and task:
                if self.ask_person:
                    steps.append(
                        f"hive send --to human --needs-human --act query --task {task} "
                        f"--subject {shlex.quote(self.ask_person)} --body {shlex.quote(self.ask_person)}"
                    )
                    self.ask_person = None
                steps.append(f"hive reply {message['id']} --act agree --body 'On it.'")
                result = RESULTS.get(self.agent, "Done.")
                steps.append(f"hive task done {task} --result {shlex.quote(result)}")
            steps.append(f"hive done {message['id']}")
        if not steps:
            return [Text("Nothing for me.")]
        return [bash(" && ".join(steps), "work through my mail")]
