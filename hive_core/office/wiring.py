"""The office without a screen: one process that owns a home and runs its parts.

`hive-office serve` runs this headless; the app runs the same object inside Textual.
It holds the office lock (one office per home), then runs the router (driven by the
hive watcher, the kick socket and a slow sweep, routes.py) and the committer until told
to stop. This module wires the parts together and keeps their loops running; the
person's actions are person.py, registry.json is registry.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from hive_core import ci
from hive_core.agents.providers import providers
from hive_core.clients.client_socket import ClientServer
from hive_core.clients.grids import PaneGrids
from hive_core.clients.protocol import PROTOCOL_VERSION, Welcome
from hive_core.committer import COMMIT_COMPONENT, Committer
from hive_core.config import load_office
from hive_core.control import ControlServer, Listener, keep_sockets
from hive_core.cost import CostWatch
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.strays import Strays, set_subreaper
from hive_core.desks.supervisor import Supervisor
from hive_core.events.hook_socket import HookServer
from hive_core.events.plane import EventPlane
from hive_core.health import HealthBoard, Problem
from hive_core.hint import office_command
from hive_core.hive import ensure_mailbox, read_registry, tighten_modes
from hive_core.ids import new_message_id, utc_now_iso
from hive_core.kick import KickServer
from hive_core.logfile import LogRotation
from hive_core.mail import iter_inbox
from hive_core.memory import MemoryStore, open_store
from hive_core.memory.keeper import MemoryKeeper
from hive_core.memory.retention import Retention
from hive_core.memory.tidy import summarising
from hive_core.office.explained import StatusKeeper
from hive_core.office.person import ENTER_DELAY_S, Person
from hive_core.office.registry import RegistryPublisher
from hive_core.office.routes import RouteDriver
from hive_core.office.semantic import SemanticMemory
from hive_core.office.verbs import Program, Verbs
from hive_core.pace import Pace
from hive_core.paths import HivePaths
from hive_core.remote.relay import Relay
from hive_core.routing.router import Router, RouteStats
from hive_core.routing.rules import RouteRoster, router_notice
from hive_core.schema import HUMAN, ROUTER, AgentSpec, LogEvent, OfficeConfig, Registry
from hive_core.team.digest import DigestWatch
from hive_core.team.escalations import PromptTeller
from hive_core.team.standup import FIRST_PROMPT, replaced, standup_message
from hive_core.team.wake import WakeFault, WakeView, Watchdog
from hive_core.text import one_line
from hive_core.worktrees import WorktreeKeeper, running_children

# A loop that dies is restarted after this long, doubling up to the cap; one that then
# runs this long without failing is taken as recovered.
RESTART_BACKOFF_S = 0.5
RESTART_BACKOFF_MAX_S = 30.0
RECOVERED_AFTER_S = 60.0
# How long a thread keeps the interpreter while another waits for it, as long as the office
# runs (CPython's default is 5 ms). The loop answers the person's keys; during a burst the
# route, commit and memory threads all want the interpreter, and each hop of a key's echo
# (the client's input, the pty's output) waited up to one interval per busy thread.
SWITCH_INTERVAL_S = 0.001
# The cyclic collector's thresholds while the office runs (CPython 3.13's: 2,000, 10, 10):
# a young collection every GC_YOUNG allocations not yet freed, the older generations
# after GC_OLDER[0] and GC_OLDER[1] collections of the one below.
GC_YOUNG = 50_000
GC_OLDER = (20, 10)


@dataclass
class Listeners:
    """Who wants to know what happens in the office (the app; nothing when headless).
    Called on the office's loop; they must be quick.

    `routed` gets each routing pass once (who sent to whom, whose inbox got a copy);
    `hive` gets what the watcher saw, without the inbox copies the router already
    reported, so a routed message reaches a listener once."""

    agent: list[Callable[[AgentState], None]] = field(default_factory=list)
    routed: list[Callable[[RouteStats], None]] = field(default_factory=list)
    hive: list[Callable[[set[Path]], None]] = field(default_factory=list)
    health: list[Callable[[list[Problem]], None]] = field(default_factory=list)


class Office:
    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig | None = None,
        *,
        program: Program | None,
        agents: bool = True,
    ) -> None:
        """`program`: the `hive` command line its verbs run with (cli.hive, given by what
        starts the office: the office is under the command line, not over it); None: an
        office that runs no verb, whose callers are told so (a test of the office alone)."""
        self.paths = paths
        self.config = config = config or load_office(paths.office_toml)
        self.with_agents = agents
        # Made in the order they depend on one another, each given what it uses; the few
        # parts that call one made after them are joined to it once both exist (below).
        self.listeners = Listeners()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._recover_marks: dict[str, int] = {}
        # Per agent, the mail released at the Stop drain's cap that someone was told of.
        self._cap_told: dict[str, frozenset[str]] = {}
        self.health = health = HealthBoard(paths.health_file, on_change=self._health_changed)
        # The person's keys come first: routing, commits and indexing give way to them.
        self.pace = Pace()
        self.log_rotation = LogRotation(paths, report=partial(health.set, "log"))
        self.committer = Committer(
            paths.hive,
            on_problem=partial(health.report, COMMIT_COMPONENT),
            on_ok=partial(health.clear, COMMIT_COMPONENT),
            give_way=self.pace.give_way,
        )
        self.committer.before_commit = self._rotate_log
        previous = read_registry(paths)
        known = {e.id: e for e in previous.agents} if previous else {}
        archived = frozenset(i for i, e in known.items() if e.status == "archived")
        self.router = Router(
            paths, RouteRoster.from_config(config, archived), give_way=self.pace.give_way
        )
        self.states = states = AgentStates(
            AgentState(
                spec=spec,
                manager=spec.id == config.office.manager,
                # Kept so a restarted agent resumes its conversation.
                session_id=known[spec.id].session_id if spec.id in known else None,
                status="archived" if spec.id in archived else "offline",
            )
            for spec in config.agents
        )
        states.listeners.append(self._agent_changed)
        self.providers = providers()
        # Tokens and cost per agent and task, read from the CLIs' own records.
        self.cost = CostWatch(paths, config, self.providers, os.environ)
        # A remote desk at work is read every pass; an idle one less often.
        self.cost.remote.busy = lambda agent: (
            (state := states.get(agent)) is not None and state.status == "working"
        )
        self.plane = EventPlane(paths, config, states, self.providers, touch=self.committer.touch)
        self.plane.on_event.append(self._event_seen)
        self.memory = MemoryKeeper(
            paths,
            budget=config.office.memory_budget,
            use_cli=config.office.memory_tidy == "cli",
            log=self._agent_log,
            retention=Retention.of(config.office),
            give_way=self.pace.give_way,
        )
        self.watchdog = Watchdog(
            self._wake_views,
            send_nudge=self._nudge,
            tell_manager_once=self._tell_manager,
            show_title=self._mail_title,
            log=self._agent_log,
        )
        self.routes = RouteDriver(
            paths,
            self.router,
            self.committer,
            self.memory,
            self.plane.inboxes,
            states,
            routed=self.listeners.routed,
            hive=self.listeners.hive,
            tell=self._tell,
            poke=self.watchdog.poke,
            office_log=self._office_log,
            log_event=self.plane.log,
            health=health,
        )
        # The router reports each pass to the route driver, which is made over the router.
        self.router.on_change = self.routes.routed
        self.worktrees = WorktreeKeeper(
            paths, config, log=self._agent_log, report=health.set, post=self.routes.post
        )
        self.supervisor = Supervisor(
            paths,
            config,
            states,
            self.providers,
            log=self._agent_log,
            workplace=self.worktrees.workplace,
            tell_manager=self._tell_link,
            report=health.set,
        )
        self.registry = RegistryPublisher(paths, config, states, self.committer)
        # The office keeps every pane's screen: for the app (issue 11), and for the status,
        # which reads what a CLI draws.
        self.grids = PaneGrids(self.supervisor)
        self.status = StatusKeeper(
            states,
            self.supervisor,
            self.providers,
            self.plane.inboxes,
            self.watchdog,
            self.grids,
            stall_after_s=config.office.stall_after_s,
            cap_told=lambda agent_id: self._cap_told.get(agent_id, frozenset()),
            log=self._agent_log,
            command=office_command(paths.home),
        )
        self.person = Person(
            paths,
            config,
            states,
            self.providers,
            self.supervisor,
            self.router,
            self.committer,
            self.routes,
            self.registry,
            self.status,
            add_agent=self.add_agent,
            log=self._agent_log,
        )
        # A remote desk's own hook and control sockets (its ssh link forwards the host's
        # ends here): a connection is the desk whose socket it came in on. `hive` verbs,
        # on every control socket, run here as their caller (office/verbs.py); a desk's
        # long-lived ones in a process of their own (the relay).
        self.relay = Relay(paths.home, self.plane.secret_of, log=self._agent_log)
        self.verbs = Verbs(paths.home, self.plane.secret_of, self.relay, program)
        # Semantic memory search: the model loaded once, by the first search, off the loop.
        self.semantic = SemanticMemory(paths, roster=lambda: list(states), log=self._office_log)
        self.control = ControlServer(
            paths.control_socket,
            self.person.perform,
            agents=states,
            log=self._agent_log,
            relay=self.verbs,
            desks=self._desk_processes,
            memory=self.semantic.answer,
        )
        self.hooks = HookServer(
            paths.hook_socket,
            secret_of=self.plane.secret_of,
            handle=self.plane.handle,
            rejected=self.plane.rejected,
            failed=self.plane.failed,
            who=self.control.who,
        )
        # What agents leave behind is adopted by this process (strays.py).
        self.strays = Strays(own=lambda: [*self._desk_processes(), *running_children()])
        self.desks: dict[str, tuple[HookServer, ControlServer]] = {
            spec.id: self._desk_servers(spec.id) for spec in config.agents if spec.host
        }
        # Every socket the office keeps listening on (keep_sockets); run() adds the kick
        # socket, add_agent a hired remote desk's.
        self.sockets: list[Listener] = [
            self.control,
            self.hooks,
            *(server for pair in self.desks.values() for server in pair),
        ]
        # The manager's floor view: a periodic digest of the peers' traffic (digest.py).
        self.digest = DigestWatch(
            paths, config, thread_of=self.router.hops.get, post=self.routes.post
        )
        # A permission prompt left open is told to the manager once (escalations.py).
        self.prompts = PromptTeller(config, self.routes.post)
        states.listeners.append(self.prompts.changed)
        # The app attaches here (issue 11).
        self.clients = ClientServer(
            paths.client_socket,
            paths.clients_file,
            states=states,
            supervisor=self.supervisor,
            grids=self.grids,
            perform=self.person.perform,
            welcome=self._welcome,
            problems=lambda: health.problems,
            costs=lambda: (self.cost.agents, self.cost.tasks),
            log=lambda line: print(f"hive-office: {line}", file=sys.stderr, flush=True),
            typed=self.pace.typed,
        )
        self.supervisor.sinks.append(self.clients.output)
        self.listeners.agent.append(self.clients.agent_changed)
        self.listeners.routed.append(self.clients.routed)
        self.listeners.hive.append(self.clients.hive_changed)
        self.listeners.health.append(self.clients.health_changed)
        self.cost.listeners.append(self.clients.cost_changed)

    def _rotate_log(self) -> None:
        """Before each commit: the log rotated if it is due, its new segments staged."""
        self.committer.touch(*self.log_rotation())

    def _agent_log(self, agent_id: str, text: str) -> None:
        self.plane.log(LogEvent(ts=utc_now_iso(), kind="agent", agent=agent_id, detail=text))

    def _desk_processes(self) -> dict[int, str]:
        """What the office runs as a desk besides its CLI, each the leader of a session
        of its own, by pid: relayed verbs, and the agent's CLI summarising its memory."""
        return {**self.relay.desks(), **summarising()}

    def _desk_servers(self, agent_id: str) -> tuple[HookServer, ControlServer]:
        hooks = HookServer(
            self.paths.desk_socket(agent_id, "hook"),
            secret_of=self.plane.secret_of,
            handle=self.plane.handle,
            rejected=self.plane.rejected,
            failed=self.plane.failed,
            desk=agent_id,
            who=lambda sock: self.control.who(sock),
        )
        control = ControlServer(
            self.paths.desk_socket(agent_id, "control"),
            self.person.perform,
            agents=self.states,
            log=self._agent_log,
            desk=agent_id,
            relay=self.verbs,
            memory=self.semantic.answer,
        )
        return hooks, control

    def _welcome(self) -> Welcome:
        return Welcome(
            version=PROTOCOL_VERSION,
            office=self.config.office.name,
            home=str(self.paths.home),
            roster=[s.id for s in self.states.values() if not s.spec.archived],
            manager=self.config.office.manager,
            pid=os.getpid(),
        )

    # --- the wake path ---------------------------------------------------------------

    def _wake_views(self) -> list[WakeView | WakeFault]:
        """Agents whose CLI is running: nobody can be woken (or told about) otherwise.
        An agent whose view cannot be built is a fault of its own, not of the tick."""
        views: list[WakeView | WakeFault] = []
        for state in self.states.values():
            session = self.supervisor.sessions.get(state.id)
            if session is None or not session.alive or state.status == "archived":
                continue
            try:
                unread, ids = self.plane.inboxes.snapshot(state.id)
            except Exception as exc:
                views.append(WakeFault(state.id, f"its unread mail cannot be read: {exc!r}"))
                continue
            views.append(
                WakeView(
                    id=state.id,
                    status=state.status,
                    quiet_for=self.supervisor.quiet_for(state.id),
                    hookless=self.providers[state.spec.provider].hookless,
                    manager=state.manager,
                    paused=state.paused,
                    halted=state.halted,
                    typed_ago=state.typed_ago(),
                    unread=unread,
                    unread_ids=ids,
                    announced=frozenset(state.told_in_turn),
                )
            )
        return views

    def _nudge(self, agent_id: str, text: str) -> None:
        """Type the nudge as a paste, then Enter on its own; not marked as the person's
        typing (that would hold the Stop drain back)."""
        self.supervisor.paste(agent_id, text)
        asyncio.get_running_loop().call_later(ENTER_DELAY_S, self.supervisor.write, agent_id, b"\r")

    def _tell_manager(self, agent_id: str, text: str) -> None:
        manager = self.config.office.manager
        notice_id = f"{new_message_id()}-hookless"
        subject = f"{agent_id} cannot read its mail by itself"
        self.routes.post(manager, router_notice(notice_id, manager, subject, text))

    def _tell_link(self, agent_id: str, subject: str, text: str) -> None:
        """A remote host that stays down: the manager hears it (the person, when the
        manager's own desk is on it)."""
        manager = self.config.office.manager
        to = HUMAN if agent_id == manager else manager
        self.routes.post(to, router_notice(f"{new_message_id()}-link", to, subject, text))

    def _mail_title(self, agent_id: str, text: str | None) -> None:
        with self.states.edit(agent_id) as state:
            state.mail_title = text

    def _event_seen(self, agent_id: str, event_name: str) -> None:
        if event_name == "UserPromptSubmit":
            self.watchdog.confirmed(agent_id)
        elif event_name in ("Stop", "SessionStart"):
            self.watchdog.poke()
            if event_name == "Stop":
                self.memory.idle(self.states[agent_id].spec)
                self._tell_released(agent_id)
        self.status.hook_event(agent_id)

    def _tell_released(self, agent_id: str) -> None:
        """Mail the Stop drain let go at its cap stays unread and is not pushed again:
        the manager is told once per message (the person, when it is the manager's)."""
        state = self.states[agent_id]
        unread, ids = self.plane.inboxes.snapshot(agent_id)
        told = self._cap_told.get(agent_id, frozenset()) & ids
        news = (state.released & ids) - told
        self._cap_told[agent_id] = told | news
        if not news:
            return
        to = HUMAN if state.manager else self.config.office.manager
        items = sorted((m for m in unread if m.id in news), key=lambda m: m.id)
        lines = [
            f"- {m.id} from {one_line(m.sender, 64)}: {one_line(m.subject, 80) or '(no subject)'}"
            for m in items
        ]
        count = f"{len(items)} message{'s' if len(items) != 1 else ''}"
        text = (
            f"{agent_id} was kept working {state.released_blocks} times to read {count} and "
            "ended its turn without reading them, so the Stop drain let them go at its cap. "
            "The office will not push them on it again; they wait in its inbox until it "
            "runs `hive inbox`:\n"
            + "\n".join(lines)
            + f"\n`{office_command(self.paths.home, 'why', agent_id)}` says the same."
        )
        notice_id = f"{new_message_id()}-released"
        subject = f"{agent_id} left {count} unread"
        self.routes.post(to, router_notice(notice_id, to, subject, text))
        self._agent_log(agent_id, f"released at the cap, told {to}: {', '.join(sorted(news))}")

    # --- start-up -------------------------------------------------------------------

    def prepare(self) -> None:
        """Make sure every mailbox exists and the registry matches the roster. Touches
        the whole home: run it off the loop (run() does, on the route thread)."""
        tightened = tighten_modes(self.paths)
        if tightened:
            self._office_log(
                f"tightened the permissions of {tightened} files and folders in "
                f"{self.paths.home} to its user only"
            )
        for who in [*(a.id for a in self.config.agents), HUMAN]:
            moved = ensure_mailbox(self.paths, who)
            if moved:
                self.router.tell_moved(who, moved)
        self.registry.write()

    @contextlib.contextmanager
    def _memory_index(self) -> Iterator[MemoryStore]:
        """memory.db for a pass of the CI-log sweep; a rebuild it meets is logged as the
        memory loop logs its own."""
        with open_store(self.paths) as store:
            for line in store.recovered:
                self._office_log(f"memory: {line}")
            yield store

    async def add_agent(self, spec: AgentSpec) -> None:
        """A hired agent (hive_core/team/hire.py, already in office.toml) joins the running
        office as start-up would have made it: its mailbox, the router's roster, the hook
        policy's roster, its state (the registry and the app hear of it), its CLI, and a
        word to the manager."""
        loop = asyncio.get_running_loop()
        self.config.agents.append(spec)
        await loop.run_in_executor(self.routes.thread, self._new_desk, spec.id)
        on_floor = [a for a in self.config.agents if not a.archived]
        self.plane.facts = dataclasses.replace(
            self.plane.facts,
            roster=[(a.id, a.name, a.role) for a in on_floor],
            web_agents=[a.id for a in on_floor if a.web],
        )
        self.person.refloor()
        self.states.add(AgentState(spec=spec, manager=False, status="offline"))
        if spec.host and spec.id not in self.desks:
            pair = self.desks[spec.id] = self._desk_servers(spec.id)
            for server in pair:
                await server.start()
            self.sockets.extend(pair)
        started = False
        if self.with_agents and not spec.send_only:
            # Like the team at start-up: without a login it waits for the first desk.
            started = await self.supervisor.start(spec.id, login_gate=True)
        self._agent_log(spec.id, "hired by the person")
        manager = self.config.office.manager
        if manager in self.states:
            role = f" ({one_line(spec.role, 200)})" if spec.role else ""
            how = (
                "Its CLI is starting."
                if started
                else f"Its CLI is not running: {self.states[spec.id].missing or 'see hive log'}."
            )
            text = (
                f"The person hired {spec.id}, {one_line(spec.name, 64)}{role}, on "
                f"{spec.provider}{', reading the web' if spec.web else ''}. {how} "
                f"`hive roster` lists the team; send it work with `hive send --to {spec.id}`."
            )
            notice = router_notice(
                f"{new_message_id()}-hired", manager, f"{spec.id} joined the team", text
            )
            self.routes.post(manager, notice)

    def _new_desk(self, agent_id: str) -> None:
        """On the route thread: the new agent's mailbox, and its unread index read once."""
        moved = ensure_mailbox(self.paths, agent_id)
        if moved:
            self.router.tell_moved(agent_id, moved)
        self.plane.inboxes.refresh([agent_id])

    # --- running --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        loop = self._loop = self.routes.loop = asyncio.get_running_loop()
        # Start-up reads and writes the whole home: on the route thread, so the app's
        # first frame is not held back by a backlog or a large hive.
        await loop.run_in_executor(self.routes.thread, self._start_up)
        # The cyclic collector holds the GIL, so while it runs (on whichever thread
        # allocates) the loop echoes no key. A routing burst allocates fast, and at
        # CPython's thresholds it collected ~110 times over 2 ms in 8 bursts of 2,000
        # messages (870 ms in all, single pauses of 25-50 ms): collected every GC_YOUNG
        # allocations instead, most of a pass's objects are gone by then, and what
        # start-up built (modules, the office, its indexes) is frozen out of the full
        # collections. Given back when the run ends, for a program that hosts the office
        # and goes on (a test, the app).
        gc.freeze()
        gc_threshold = gc.get_threshold()
        gc.set_threshold(GC_YOUNG, *GC_OLDER)
        # Before any agent starts: what one leaves behind must never reach init. Given
        # back however the run ends (a cancelled shutdown too), for a program that hosts
        # the office and goes on (a test, the app).
        was_subreaper = set_subreaper(True)
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(switch_interval, SWITCH_INTERVAL_S))
        try:
            await self._serve(stop, loop)
        finally:
            sys.setswitchinterval(switch_interval)
            set_subreaper(was_subreaper)
            gc.set_threshold(*gc_threshold)
            gc.unfreeze()

    async def _serve(self, stop: asyncio.Event, loop: asyncio.AbstractEventLoop) -> None:
        kicks = KickServer(self.paths.kick_socket, self.routes.request_scan)
        await kicks.start()
        await self.hooks.start()
        await self.control.start()
        for pair in list(self.desks.values()):
            for server in pair:
                await server.start()
        await self.clients.start()
        self.sockets.extend([self.clients, kicks])
        # The committer stops last, after the final routing pass, so its last commit
        # holds everything.
        commit_stop = asyncio.Event()
        committing = asyncio.create_task(
            self._supervised("commit", lambda: self.committer.run(commit_stop), commit_stop),
            name="commit",
        )
        bodies: dict[str, Callable[[], Awaitable[None]]] = {
            "watch": lambda: self.routes.watch(stop),
            "route": lambda: self.routes.run(stop),
            "registry": lambda: self.registry.run(stop),
            "wake": lambda: self.watchdog.run(stop),
            "status": lambda: self.status.run(stop),
            "memory": lambda: self.memory.run(stop),
            "cost": lambda: self.cost.run(
                stop, lambda: {s.id: s.session_id for s in self.states.values()}
            ),
            "worktrees": lambda: self.worktrees.run(stop),
            "strays": lambda: self.strays.run(stop),
            "digest": lambda: self.digest.run(stop),
            "ci-logs": lambda: ci.sweep_loop(
                self.paths,
                self.config.office,
                stop,
                self._office_log,
                self._memory_index,
            ),
            "sockets": lambda: keep_sockets(
                stop,
                self.sockets,
                lambda path: self._office_log(f"{path.name} was gone; listening on it again"),
            ),
        }
        if self.config.office.manager_watch == "off":
            del bodies["digest"]
        loops = [
            asyncio.create_task(self._supervised(name, body, stop), name=name)
            for name, body in bodies.items()
        ]
        try:
            if self.with_agents:
                manager = self._standup_to()
                await self.supervisor.start_all({manager: FIRST_PROMPT} if manager else {})
                if manager:
                    # Built once the team's CLIs have started, so it says who runs; the
                    # manager's first prompt tells it the standup comes (and if it looks
                    # before, the wake path brings it back to unread mail).
                    team = [s.entry() for s in self.states.values()]
                    standup = standup_message(self.paths, self.config, team)
                    await loop.run_in_executor(
                        self.routes.thread, self.router.post, manager, standup
                    )
            await stop.wait()
        finally:
            # The loops end on `stop`. A run that ends otherwise (cancelled: the app's
            # worker when the app exits; a failed start) sets it too, or they would run
            # on and the gather below, and whoever waits for this run, wait forever.
            stop.set()
            self.routes.wake()
            self.registry.dirty.set()
            await self.control.stop()
            self.relay.close()
            for _desk_hooks, desk_control in list(self.desks.values()):
                await desk_control.stop()
            # A verb the office took is done before it goes (its caller told).
            await self.verbs.close()
            self.semantic.close()
            await self.supervisor.stop_all()
            # What the agents left behind ends with them.
            await asyncio.to_thread(self.strays.end)
            await self.clients.stop()
            await self.hooks.stop()
            # As the office's own: a remote CLI's last hooks (SessionEnd) still answered.
            for desk_hooks, _desk_control in list(self.desks.values()):
                await desk_hooks.stop()
            await kicks.stop()
            await asyncio.gather(*loops, return_exceptions=True)
            for state in self.states.values():
                if state.status not in ("offline", "archived"):
                    with self.states.edit(state.id):
                        state.status = "exited"
            await loop.run_in_executor(
                self.routes.thread, self._shut_down, self.registry.snapshot()
            )
            self.plane.inboxes.close()
            commit_stop.set()
            await committing

    def _start_up(self) -> None:
        """On the route thread, before any loop runs. Nothing left over from a previous
        run may keep the office from starting: what fails is reported, and the route
        loop tries again."""
        self.health.publish()
        self.prepare()
        self._guarded("route", self.router.recover)
        self._guarded("route", self.router.scan_all)
        if self._standup_to():
            self._guarded("route", self._retire_standups)
        # Read every inbox once now, so the first hook or tick does not pay for it.
        self.plane.inboxes.refresh(list(self.states))

    def _standup_to(self) -> str | None:
        """The manager, if this start gives it a standup (its CLI is started)."""
        manager = self.config.office.manager
        state = self.states.get(manager)
        started = self.with_agents and state is not None and not state.spec.send_only
        return manager if started else None

    def _retire_standups(self) -> None:
        """This start's standup replaces the ones earlier starts left unread: removed
        before any CLI starts, so the manager never reads one that is going away (the
        hive's history keeps them)."""
        manager = self.config.office.manager
        box = self.paths.mailbox(manager)

        def ours(msg_id: str) -> bool:
            record = self.router.hops.get(msg_id)
            return record is not None and record.sender == ROUTER

        for msg_id in replaced(iter_inbox(box), ours):
            path = box.inbox / f"{msg_id}.json"
            path.unlink(missing_ok=True)
            self.committer.touch(path)
            self._agent_log(manager, f"unread standup {msg_id} replaced by this start's")

    def _shut_down(self, registry: Registry) -> None:
        """On the route thread, after every loop stopped: route what is left, publish
        the agents' last states."""
        self._guarded("route", self.router.scan_all)
        self.registry.publish(registry)

    def _health_changed(self, problems: list[Problem]) -> None:
        """From whichever thread found (or cleared) the problem; listeners hear it on
        the loop."""
        loop = self._loop
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or loop.is_closed() or here is loop:
            self._tell(self.listeners.health, problems)
        else:
            loop.call_soon_threadsafe(self._tell, self.listeners.health, problems)

    async def _supervised(
        self, name: str, body: Callable[[], Awaitable[None]], stop: asyncio.Event
    ) -> None:
        """Run one of the office's loops until `stop`; if it dies, say so loudly (log,
        health for `doctor` and the app) and start it again with backoff."""
        loop = asyncio.get_running_loop()
        backoff = RESTART_BACKOFF_S
        failures = 0
        while True:
            started = loop.time()
            try:
                await body()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if loop.time() - started >= RECOVERED_AFTER_S:
                    backoff = RESTART_BACKOFF_S
                detail = (
                    f"the {name} loop failed ({exc!r}); restarted {failures} time(s), "
                    f"next in {backoff:g} s"
                )
                self._office_log(detail)
                self.health.report(f"loop:{name}", detail)
                if stop.is_set():
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)
                backoff = min(backoff * 2, RESTART_BACKOFF_MAX_S)
                loop.call_later(RECOVERED_AFTER_S, self._maybe_recovered, name, failures)
                self._recover_marks[name] = failures

    def _maybe_recovered(self, name: str, failures: int) -> None:
        if self._recover_marks.get(name) == failures:
            self.health.clear(f"loop:{name}")

    def _guarded(self, component: str, step: Callable[[], object]) -> None:
        """Run one pass of something the loops also do; a failure is reported, not fatal."""
        try:
            step()
        except Exception as exc:
            detail = f"{component} pass failed: {exc!r}"
            self._office_log(detail)
            self.health.report(f"loop:{component}", detail)
        else:
            self.health.clear(f"loop:{component}")

    def _office_log(self, detail: str) -> None:
        # The disk may be what failed; health still carries it.
        with contextlib.suppress(OSError):
            self.plane.log(LogEvent(ts=utc_now_iso(), kind="office", detail=detail))
        print(f"hive-office: {detail}", file=sys.stderr, flush=True)

    def _agent_changed(self, state: AgentState) -> None:
        # A CLI that could not start is a problem of the office (`doctor`) until it is
        # started again.
        if state.start_failed:
            self.health.report(f"agent:{state.id}", state.start_failed)
        else:
            self.health.clear(f"agent:{state.id}")
        # Its explained status follows at once (an edit of its own only if it changed).
        self.status.refresh(state.id)
        self.registry.dirty.set()
        self._tell(self.listeners.agent, state)

    def _tell(self, listeners: list[Callable[..., None]], *args: object) -> None:
        """A failing listener (the app's) must not stop the office's own loops."""
        for listener in listeners:
            try:
                listener(*args)
            except Exception as exc:
                self.plane.log(
                    LogEvent(ts=utc_now_iso(), kind="office", detail=f"a listener failed: {exc!r}")
                )
