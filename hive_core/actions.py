"""The person's actions on a running office, each written once.

Everything that lets the person act on the office is generated from `ACTIONS`: the
control socket's commands (`Person.perform`, office/person.py), the `hive-office` verbs, the app's
prefix keys, its help screen and its key line. An action added here appears in all of
them; nothing else lists them. The app's own view commands (zoom, panels, quit) are not
actions on the office and live with the app.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import msgspec

from hive_core.schema import ControlCommand, Message

Target = Literal["agent", "message", "office"]


class PersonAction(NamedTuple):
    name: ControlCommand
    """The control request's `cmd` and the `hive-office` verb."""
    target: Target
    """What it acts on: an agent, a message in the person's inbox, or the office."""
    help: str
    """One sentence for `--help` and the app's help screen."""
    done: str
    """What is true afterwards, said to the person (`{agent}` / `{message}`, `{office}`
    the office's `hive-office` command line, and for an answer `{to}`, who got it, filled
    in)."""
    key: str | None = None
    """The app's key after the prefix; None where the app acts another way (typing goes
    to the focused pane, answers from the Inbox panel)."""
    label: str = ""
    """A word or two for the key line (empty: the key line leaves it out)."""
    confirm: str | None = None
    """The question the app asks first, for what is not undone by one key."""
    reads_only: bool = False
    """It changes nothing (status, escalations): an agent may ask too."""


ACTIONS: tuple[PersonAction, ...] = (
    PersonAction(
        "type",
        "agent",
        "Type TEXT into AGENT's terminal, as you would in its pane (like tmux send-keys).",
        "Typed into {agent}.",
    ),
    PersonAction(
        "pause",
        "agent",
        "Pause AGENT: its next tool call is refused and it is not kept working for mail.",
        "{agent} is paused; `{office} resume {agent}` lets it go on.",
        key="x",
        label="pause",
    ),
    PersonAction(
        "resume",
        "agent",
        "Resume a paused or halted AGENT.",
        "{agent} is resumed.",
        key="x",
    ),
    PersonAction(
        "halt",
        "agent",
        "Halt AGENT: it stops at its next hook (`resume` lets it go on); an agent without "
        "hooks (a shell desk) cannot be halted.",
        "{agent} will stop at its next hook.",
        key="h",
        label="halt",
    ),
    PersonAction(
        "archive",
        "agent",
        "Archive AGENT: its CLI stops and mail to it goes to the manager (`spawn` brings it back).",
        "{agent} is archived.",
        key="a",
        label="archive",
        confirm="Archive {agent}? Its CLI stops and its mail goes to the manager.",
    ),
    PersonAction(
        "spawn",
        "agent",
        "Start AGENT if it is not running (an archived agent comes back to the floor).",
        "{agent} is starting.",
        key="r",
        label="start",
    ),
    PersonAction(
        "hire",
        "office",
        "Hire AGENT: a new agent joins the running office at once (written to office.toml, "
        "checked as office.toml is) and the manager is told.",
        "{agent} is hired and on the floor; the manager was told.",
    ),
    PersonAction(
        "answer",
        "message",
        "Answer MESSAGE, an escalation in your inbox: the answer goes to the agent that "
        "asked and to the manager, in the question's thread, and on the task's open question.",
        "Your answer to {message} went to {to}.",
    ),
    PersonAction(
        "escalations",
        "office",
        "List what waits for you: the escalations and messages in your inbox.",
        "",
        reads_only=True,
    ),
    PersonAction(
        "why",
        "agent",
        "Why AGENT is shown as it is: its state, one sentence of why, and the evidence.",
        "",
        key="w",
        reads_only=True,
    ),
    PersonAction(
        "status",
        "office",
        "The registry of the running office: every agent and its state, as JSON.",
        "",
        reads_only=True,
    ),
)

BY_NAME: dict[str, PersonAction] = {action.name: action for action in ACTIONS}


class Escalation(msgspec.Struct, kw_only=True):
    """One item of the `escalations` reply (a JSON list of these): what waits for the
    person, enough to pick one and `answer` it."""

    id: str
    sender: str = msgspec.field(name="from")
    subject: str
    task: str | None
    needs_human: bool
    created: str

    @classmethod
    def of(cls, message: Message) -> Escalation:
        return cls(
            id=message.id,
            sender=message.sender,
            subject=message.subject,
            task=message.task,
            needs_human=message.needs_human,
            created=message.created_at,
        )
