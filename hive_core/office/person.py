"""The person's actions on a running office (actions.ACTIONS): `Person.perform` is their
one dispatch, for the control socket, the `hive-office` verbs and the app alike. The
office makes one Person and gives it what it acts on."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar

import msgspec

from hive_core.actions import BY_NAME, Escalation
from hive_core.agents.provider import Provider
from hive_core.committer import Committer
from hive_core.control import refused
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.supervisor import Supervisor
from hive_core.fsio import ensure_dir
from hive_core.hint import office_command
from hive_core.ids import utc_now_iso
from hive_core.mail import (
    BadMessage,
    check_draft,
    find_message,
    is_safe_id,
    iter_inbox,
    load_message,
    mark_done,
    send,
)
from hive_core.office.explained import StatusKeeper
from hive_core.office.registry import RegistryPublisher
from hive_core.office.routes import RouteDriver
from hive_core.paths import HivePaths
from hive_core.routing.router import Router
from hive_core.routing.rules import RouteRoster
from hive_core.schema import (
    BODY_MAX,
    HUMAN,
    SUBJECT_MAX,
    AgentSpec,
    ControlReply,
    ControlRequest,
    Draft,
    Message,
    OfficeConfig,
    Task,
)
from hive_core.team import escalations, leases, tasks
from hive_core.team.hire import HireRefused, hire_into, on_the_roster, spec_from_request

# An Enter in the same read as the paste would be taken as part of the paste.
ENTER_DELAY_S = 0.5


class Person:
    """The person, acting on the office they run: on its desks (type, pause, halt,
    archive, spawn, why), its roster (hire), and what waits for them (answer)."""

    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        states: AgentStates,
        providers: Mapping[str, Provider],
        supervisor: Supervisor,
        router: Router,
        committer: Committer,
        routes: RouteDriver,
        registry: RegistryPublisher,
        status: StatusKeeper,
        *,
        add_agent: Callable[[AgentSpec], Awaitable[None]],
        log: Callable[[str, str], None],
    ) -> None:
        """`config` is the office's own (a hire adds to its roster); `add_agent` brings a
        hired agent into the running office; `log` is the office's log of an agent."""
        self.paths = paths
        self.config = config
        self.states = states
        self.providers = providers
        self.supervisor = supervisor
        self.router = router
        self.committer = committer
        self.routes = routes
        self.registry = registry
        self.status = status
        self._add_agent = add_agent
        self._log = log

    async def type_into(self, agent_id: str, text: str, *, enter: bool = True) -> None:
        """Type into an agent's terminal as the person: a paste (bracketed where the
        program asked for it, so newlines do not submit early), then Enter on its own
        once the CLI has taken the paste."""
        state = self.states[agent_id]
        state.typed()
        self.supervisor.paste(agent_id, text)
        if enter:
            await asyncio.sleep(ENTER_DELAY_S)
            self.supervisor.write(agent_id, b"\r")

    def set_paused(self, agent_id: str, paused: bool) -> None:
        """Pause: every tool call is refused and mail is not forced on it. Resume also
        lifts a halt."""
        state = self.states[agent_id]
        if state.paused != paused or (not paused and state.halted):
            with self.states.edit(agent_id):
                state.paused = paused
                if not paused:
                    state.halted = False
            self._log(agent_id, "paused by the person" if paused else "resumed by the person")

    def halt(self, agent_id: str) -> None:
        """Stop the agent at its next hook: its next tool call is refused with an order
        to stop, and its turn ends without being kept going."""
        if not self.states[agent_id].halted:
            with self.states.edit(agent_id) as state:
                state.halted = True
            self._log(agent_id, "halted by the person")

    async def archive(self, agent_id: str) -> None:
        """Take an agent off the floor: its CLI stops, mail to it bounces to the manager."""
        await self.supervisor.terminate(agent_id)
        with self.states.edit(agent_id) as state:
            state.status = "archived"
        self.refloor()
        # An archived agent works on nothing: its file leases go.
        if await asyncio.to_thread(leases.drop_holder, self.paths, agent_id):
            self.committer.touch(self.paths.leases)
        self._log(agent_id, "archived by the person")

    async def spawn(self, agent_id: str) -> bool:
        """Start an agent that is not running (an archived one comes back to the floor)."""
        if self.states[agent_id].status == "archived":
            with self.states.edit(agent_id) as state:
                state.status = "offline"
            self.refloor()
        started = await self.supervisor.start(agent_id)
        self._log(agent_id, "started by the person" if started else "could not be started")
        return started

    def _record_answer(self, message: Message, text: str) -> None:
        """The answer goes on the task's oldest open question; if the question only came
        by mail, it is recorded first, so the task keeps both. A task that is gone still
        gets the answer by mail."""
        assert message.task is not None
        now = utc_now_iso()
        with tasks.locked(self.paths):
            try:
                ledger = tasks.load_ledger(self.paths.tasks)
                task = tasks.find_task(ledger, message.task)
                if all(q.answer is not None for q in task.questions):
                    question = (
                        message.subject
                        if not message.body
                        else f"{message.subject}: {message.body}"
                    )
                    ledger, _ = tasks.ask_question(
                        ledger, message.task, question[:BODY_MAX], asked_by=message.sender, now=now
                    )
                ledger, _ = tasks.answer_question(ledger, message.task, text, now=now)
            except tasks.LedgerError as e:
                self._log(self.config.office.manager, f"answer not recorded on {message.task}: {e}")
                return
            tasks.save_ledger(self.paths.tasks, ledger)
        self.committer.touch(self.paths.tasks)

    def refloor(self) -> None:
        """The router's floor as the desks are now (an archive or a spawn changed it)."""
        archived = frozenset(s.id for s in self.states.values() if s.status == "archived")
        self.router.roster = RouteRoster.from_config(self.config, archived)

    async def answer(self, message: Message, text: str) -> list[str]:
        """The person's answer to an escalation: recorded on the task's open question
        (if the message is about a task) and sent, in the question's thread, to whoever
        asked and to the manager; who got it. The ledger lock and the mail files are
        worked on a thread, so the app's screen never waits on them."""
        told = await asyncio.to_thread(self._write_answer, message, text)
        self.routes.request_scan(HUMAN)
        return told

    def answered_by_mail(self, message: Message) -> list[str]:
        """Who hears the person's answer to `message`: the agent that asked (if it is on
        the floor to read it) and the manager, once each."""
        manager = self.config.office.manager
        asker = message.sender
        return [asker, manager] if asker in self.router.roster.receivers - {manager} else [manager]

    def _write_answer(self, message: Message, text: str) -> list[str]:
        human = self.paths.mailbox(HUMAN)
        question = escalations.parse_task_item(message.id)
        in_human_inbox = question is None and find_message(human, message.id) is not None
        if question is not None:
            self._record_task_answer(*question, text)
        elif message.task:
            self._record_answer(message, text)
        quote = (
            ""
            if in_human_inbox
            else f"\n\n(about {message.id} from {message.sender}: {message.subject})"
        )
        told = self.answered_by_mail(message)
        for to in told:
            draft = Draft(
                to=to,
                act="inform",
                subject=f"Answer: {message.subject or message.act}"[:SUBJECT_MAX],
                body=text + quote,
                task=message.task,
                # Only a message the person received can be replied to (the router
                # checks); the thread is the question's either way.
                in_reply_to=message.id if in_human_inbox else None,
                conversation=message.conversation,
            )
            # The send path every sender takes (mail.send): checked like any other draft.
            send(self.paths, self.config, HUMAN, draft)
        if in_human_inbox:
            mark_done(human, message.id)
        elif question is None:
            self._mark_answered(message.id)
        return told

    def _record_task_answer(self, task_id: str, index: int, text: str) -> None:
        """The answer to a question recorded on a task (`hive task update --question`);
        raises LedgerError (a sentence) if it can no longer be answered."""
        with tasks.locked(self.paths):
            ledger = tasks.load_ledger(self.paths.tasks)
            ledger, _ = tasks.answer_question(ledger, task_id, text, now=utc_now_iso(), index=index)
            tasks.save_ledger(self.paths.tasks, ledger)
        self.committer.touch(self.paths.tasks)

    def _mark_answered(self, message_id: str) -> None:
        """The manager's copy of an escalation stays the manager's (unread until it reads
        it); a link to it in the person's .done marks it answered, so it waits no more."""
        human = self.paths.mailbox(HUMAN)
        ensure_dir(human.done)
        name = f"{message_id}.json"
        with contextlib.suppress(FileExistsError, FileNotFoundError):
            # Gone: the manager read it meanwhile, and then it does not wait either.
            os.link(self.paths.mailbox(self.config.office.manager).inbox / name, human.done / name)

    async def perform(self, req: ControlRequest) -> ControlReply:
        """THE dispatch of the person's actions (actions.ACTIONS), from the control
        socket, the CLI and the app alike (`whoami` is the control socket's own:
        control.decide_whoami). A refusal is `ok=False` with a sentence; success carries
        the action's done sentence, or (what only reads) its JSON."""
        action = BY_NAME.get(req.cmd)
        if action is None:
            return refused(f"{req.cmd!r} is not an action; `{self._command('--help')}` lists them")
        if action.target == "agent":
            state = self.states.get(req.agent or "")
            if state is None:
                return ControlReply(
                    ok=False, error=f"no agent {req.agent!r} on the roster; see `hive roster`."
                )
            error = await self._on_agent[action.name](self, state, req)
            if error:
                return ControlReply(ok=False, error=error)
            if action.name == "why":
                return ControlReply(ok=True, detail=msgspec.json.encode(state.explained).decode())
            return ControlReply(
                ok=True, detail=action.done.format(agent=state.id, office=self._command())
            )
        if action.name == "hire":
            hired = self._hire_request(req)
            if isinstance(hired, str):
                return ControlReply(ok=False, error=hired)
            await self._add_agent(hired)
            return ControlReply(
                ok=True, detail=action.done.format(agent=req.agent, office=self._command())
            )
        if action.name == "answer":
            told = await self._answer_request(req)
            if isinstance(told, str):
                return ControlReply(ok=False, error=told)
            return ControlReply(
                ok=True,
                detail=action.done.format(
                    message=req.message, to=_who(told, self.config.office.manager)
                ),
            )
        if action.name == "escalations":
            waiting = await asyncio.to_thread(self.waiting_for_person)
            escalations = [Escalation.of(m) for m in waiting]
            return ControlReply(ok=True, detail=msgspec.json.encode(escalations).decode())
        assert action.name == "status", action.name
        return ControlReply(ok=True, detail=msgspec.json.encode(self.registry.snapshot()).decode())

    async def _type_request(self, state: AgentState, req: ControlRequest) -> str | None:
        session = self.supervisor.sessions.get(state.id)
        if session is None or not session.alive:
            why = state.missing or "it is not running (was the office started with --no-agents?)"
            return f"cannot type into {state.id}: {why}"
        await self.type_into(state.id, req.text, enter=req.enter)
        return None

    async def _pause_request(self, state: AgentState, req: ControlRequest) -> str | None:
        self.set_paused(state.id, True)
        return None

    async def _resume_request(self, state: AgentState, req: ControlRequest) -> str | None:
        self.set_paused(state.id, False)
        return None

    async def _halt_request(self, state: AgentState, req: ControlRequest) -> str | None:
        provider = state.spec.provider
        if self.providers[provider].hookless:
            # A halt is a refusal at the agent's next hook; a CLI without hooks never
            # reaches one, so a halt set on it would only look like one.
            return (
                f"{state.id} cannot be halted: its CLI ({provider}) has no hooks to stop it "
                f"at, so nothing was changed. Interrupt it in its pane (ctrl+c), or "
                f"`{self._command('archive', state.id)}` stops its CLI."
            )
        self.halt(state.id)
        return None

    async def _archive_request(self, state: AgentState, req: ControlRequest) -> str | None:
        await self.archive(state.id)
        return None

    async def _why_request(self, state: AgentState, req: ControlRequest) -> str | None:
        # Decided now, not at the last change: a stall is a matter of time alone.
        self.status.refresh(state.id)
        return None

    async def _spawn_request(self, state: AgentState, req: ControlRequest) -> str | None:
        if await self.spawn(state.id):
            return None
        return f"{state.id} could not start: {state.missing or 'see hive log'}"

    # The agent actions of actions.ACTIONS, each once (a test checks none is missing).

    _on_agent: ClassVar[
        dict[str, Callable[[Person, AgentState, ControlRequest], Awaitable[str | None]]]
    ] = {
        "type": _type_request,
        "pause": _pause_request,
        "resume": _resume_request,
        "halt": _halt_request,
        "archive": _archive_request,
        "spawn": _spawn_request,
        "why": _why_request,
    }

    def _hire_request(self, req: ControlRequest) -> AgentSpec | str:
        """Check the new agent and write it into office.toml: its entry, or why not (the
        file left as it was). On the loop, with no await inside: two hires are never interleaved."""
        manager = self.states.get(self.config.office.manager)
        try:
            # It works where the office works (the manager's folder).
            spec = spec_from_request(req, manager.spec.cwd if manager else "~")
            if spec.id in self.states:
                raise on_the_roster(spec.id)
            hire_into(self.paths.office_toml, spec)
        except HireRefused as e:
            return str(e)
        return spec

    async def _answer_request(self, req: ControlRequest) -> list[str] | str:
        """Who got the answer, or why it was not sent."""
        if not req.text.strip():
            return "the answer is empty: say what the manager should do."
        too_big = check_draft(Draft(to=self.config.office.manager, subject="", body=req.text))
        if too_big:
            return too_big
        message = await asyncio.to_thread(self._waiting_message, req.message or "")
        if message is None:
            return (
                f"no message {req.message!r} waits for you; "
                f"`{self._command('escalations')}` lists those that do."
            )
        try:
            return await self.answer(message, req.text)
        except OSError as exc:
            return f"your answer could not be written ({exc}); try again once that is fixed."
        except tasks.LedgerError as exc:
            return f"your answer was not recorded: {exc}"

    def waiting_for_person(self) -> list[Message]:
        """What waits for the person (escalations.waiting): their mail, the manager's
        escalations they have not answered, the tasks' open questions. Reads files: not
        on the loop."""
        human = self.paths.mailbox(HUMAN)
        manager_mail = [
            m for m in iter_inbox(self.paths.mailbox(self.config.office.manager)) if m.needs_human
        ]
        answered = {m.id for m in manager_mail if os.path.lexists(human.done / f"{m.id}.json")}
        return escalations.waiting(iter_inbox(human), manager_mail, answered, self._ledger_tasks())

    def _ledger_tasks(self) -> list[Task]:
        try:
            return tasks.tasks_of(tasks.load_ledger(self.paths.tasks))
        except tasks.LedgerError as exc:  # the mail still waits; the log says why not tasks
            self._log(self.config.office.manager, f"task questions not listed: {exc}")
            return []

    def _waiting_message(self, message_id: str) -> Message | None:
        """An escalation the person can answer: one `waiting_for_person` lists."""
        question = escalations.parse_task_item(message_id)
        if question is not None:
            task = next((t for t in self._ledger_tasks() if t.id == question[0]), None)
            items = escalations.question_items([task] if task else [], [])
            return next((m for m in items if m.id == message_id), None)
        if not is_safe_id(message_id):
            return None
        for who in (HUMAN, self.config.office.manager):
            box = self.paths.mailbox(who)
            try:
                message = load_message(box.inbox / f"{message_id}.json")
            except (BadMessage, OSError):
                continue
            answered = os.path.lexists(self.paths.mailbox(HUMAN).done / f"{message_id}.json")
            if who == HUMAN or (message.needs_human and not answered):
                return message
        return None

    def _command(self, *words: str) -> str:
        """The `hive-office` command line a hint names for this office."""
        return office_command(self.paths.home, *words)


def _who(told: list[str], manager: str) -> str:
    """`jim and michael (the manager)`: the recipients of an answer, as the done sentence
    names them."""
    names = [f"{to} (the manager)" if to == manager else to for to in told]
    return " and ".join(names)
