"""The office without a screen: one process that owns a home and runs its parts.

`hive-office serve` runs this headless; the app runs the same object inside Textual.
It holds the office lock (one office per home), then runs the router (driven by the
hive watcher, the kick socket and a slow sweep) and the committer until told to stop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import hmac
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from watchfiles import Change, awatch

from hive_core import tasks
from hive_core.agents.providers import providers
from hive_core.agents.state import AgentState
from hive_core.agents.supervisor import Supervisor
from hive_core.committer import Committer
from hive_core.config import load_office
from hive_core.control import ControlServer
from hive_core.events.plane import EventPlane
from hive_core.events.server import HookServer
from hive_core.fsio import TEMP_PREFIX
from hive_core.health import HealthBoard, Problem
from hive_core.hive import ensure_mailbox, read_registry, tighten_modes, write_registry
from hive_core.ids import new_message_id, utc_now_iso
from hive_core.logfile import rotate_if_due
from hive_core.mail import find_message, mark_done, write_draft
from hive_core.memory.keeper import MemoryKeeper
from hive_core.paths import HivePaths
from hive_core.routing.decide import Floor, router_notice
from hive_core.routing.router import WRITE_GRACE_S, DiskFull, Router, RouteStats
from hive_core.schema import (
    BODY_MAX,
    HUMAN,
    SUBJECT_MAX,
    ControlReply,
    ControlRequest,
    Draft,
    LogEvent,
    Message,
    OfficeConfig,
    Registry,
)
from hive_core.standup import FIRST_PROMPT, standup_message
from hive_core.wake import WakeFault, WakeView, Watchdog

# The sweep only catches what the watcher and the kicks missed, so it can be slow.
SWEEP_INTERVAL_S = 10.0
# Watcher batching: changes are grouped for this long (ms). Kicks make CLI-sent mail
# immediate, so this only bounds hand-written files and costs no idle CPU worth noting.
WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 50
# A path the router reported stands for the watcher's `added` of it this long (the
# watcher lags a busy burst by a second or two). Past it, or past this many paths (files
# the watcher never saw), it is forgotten: the watcher then tells the committer and
# memory again, which is harmless.
REPORTED_FOR_S = 10.0
REPORTED_MAX = 50_000
# Bracketed paste: the CLI takes the text as one paste, not as keystrokes.
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
# An Enter in the same read as the paste would be taken as part of the paste.
ENTER_DELAY_S = 0.5
# Hooks fire in bursts; registry.json is rewritten at most this often.
REGISTRY_INTERVAL_S = 0.25
# A loop that dies is restarted after this long, doubling up to the cap; one that then
# runs this long without failing is taken as recovered.
RESTART_BACKOFF_S = 0.5
RESTART_BACKOFF_MAX_S = 30.0
RECOVERED_AFTER_S = 60.0
# While a full disk pauses routing, it is tried again this often.
DISK_RETRY_S = 1.0


class OfficeBusy(Exception):
    def __init__(self, paths: HivePaths, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"another office is already running on {paths.home} ({who}). Stop it first "
            f"(kill {pid or '<pid>'}), or use --home for a different office."
        )
        self.pid = pid


@contextlib.contextmanager
def office_lock(paths: HivePaths) -> Iterator[None]:
    """Hold the home's office lock: an flock on the home folder itself. A lock file could
    be deleted and another office would lock a new one; the folder cannot be replaced
    while it holds the office. flock dies with the process, so a crash never leaves a
    stale lock behind."""
    fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OfficeBusy(paths, _read_pid(paths.pid_file) or _flock_holder(fd)) from None
        paths.run.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.pid_file.write_text(f"{os.getpid()}\n")
        try:
            yield
        finally:
            paths.pid_file.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _flock_holder(fd: int) -> int | None:
    """Who holds the flock on `fd`'s file, from /proc/locks (Linux), for when the pid
    file is gone too."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            with contextlib.suppress(ValueError):
                return int(fields[4])
    return None


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
        self, paths: HivePaths, config: OfficeConfig | None = None, *, agents: bool = True
    ) -> None:
        self.paths = paths
        self.config = config or load_office(paths.office_toml)
        self.with_agents = agents
        # Health is made further down; these run only once the office runs.
        self.committer = Committer(
            paths.hive,
            before_commit=lambda: self.committer.touch(*rotate_if_due(paths)),
            on_problem=lambda detail: self.health.report("commit", detail),
            on_ok=lambda: self.health.clear("commit"),
        )
        previous = read_registry(paths)
        known = {e.id: e for e in previous.agents} if previous else {}
        archived = frozenset(i for i, e in known.items() if e.status == "archived")
        self.router = Router(
            paths, Floor.from_config(self.config, archived), on_change=self._routed
        )
        self.states: dict[str, AgentState] = {}
        for spec in self.config.agents:
            state = AgentState(spec=spec, manager=spec.id == self.config.office.manager)
            if spec.id in known:
                # Kept so a restarted agent resumes its conversation.
                state.session_id = known[spec.id].session_id
                if known[spec.id].status == "archived":
                    state.status = "archived"
            self.states[spec.id] = state
        self.providers = providers()
        self.plane = EventPlane(
            paths,
            self.config,
            self.states,
            self.providers,
            on_change=self._agent_changed,
            touch=self.committer.touch,
        )
        self.hooks = HookServer(
            paths.hook_socket,
            secret_of=self.plane.secret_of,
            handle=self.plane.handle,
            rejected=self.plane.rejected,
            failed=self.plane.failed,
        )
        self.supervisor = Supervisor(
            paths,
            self.config,
            self.states,
            self.providers,
            on_change=self._agent_changed,
            log=self._agent_log,
        )
        self.control = ControlServer(paths.control_socket, self._control)
        self.watchdog = Watchdog(
            self._wake_views,
            send_nudge=self._nudge,
            tell_manager_once=self._tell_manager,
            show_title=self._mail_title,
            log=self._agent_log,
        )
        self.plane.on_event.append(self._event_seen)
        self.memory = MemoryKeeper(
            paths,
            budget=self.config.office.memory_budget,
            use_cli=self.config.office.memory_tidy == "cli",
            log=self._agent_log,
        )
        self.listeners = Listeners()
        self.health = HealthBoard(paths.health_file, on_change=self._health_changed)
        self._kicked: set[str] = set()
        # Routing passes touch the disk in bulk: they run here, one at a time, never on
        # the loop (the app's screen); what they report comes back through the loop.
        self._route_thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="route"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        # The reports of the route pass under way (route thread only), see _route_pass.
        self._gathered: list[RouteStats] | None = None
        # What the router wrote and reported (as the watcher spells paths), see _sort_changes.
        self._reported: dict[str, float] = {}
        self._reported_lock = threading.Lock()
        self._recover_marks: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._registry_dirty = asyncio.Event()

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
        self.supervisor.write(agent_id, PASTE_START + text.encode() + PASTE_END)
        asyncio.get_running_loop().call_later(ENTER_DELAY_S, self.supervisor.write, agent_id, b"\r")

    def _tell_manager(self, agent_id: str, text: str) -> None:
        manager = self.config.office.manager
        notice_id = f"{new_message_id()}-hookless"
        subject = f"{agent_id} cannot read its mail by itself"
        self._post(manager, router_notice(notice_id, manager, subject, text))

    def _mail_title(self, agent_id: str, text: str | None) -> None:
        state = self.states[agent_id]
        state.mail_title = text
        self._agent_changed(state)

    def _event_seen(self, agent_id: str, event_name: str) -> None:
        if event_name == "UserPromptSubmit":
            self.watchdog.confirmed(agent_id)
        elif event_name in ("Stop", "SessionStart"):
            self.watchdog.poke()
            if event_name == "Stop":
                self.memory.idle(self.states[agent_id].spec)

    # --- what the person can do (the app's keys, `hive-office type/pause/resume`) ------

    async def type_into(self, agent_id: str, text: str, *, enter: bool = True) -> None:
        """Type into an agent's terminal as the person: a bracketed paste (so newlines do
        not submit early), then Enter on its own once the CLI has taken the paste."""
        state = self.states[agent_id]
        state.typed()
        self.supervisor.write(agent_id, PASTE_START + text.encode() + PASTE_END)
        if enter:
            await asyncio.sleep(ENTER_DELAY_S)
            self.supervisor.write(agent_id, b"\r")

    def set_paused(self, agent_id: str, paused: bool) -> None:
        """Pause: every tool call is refused and mail is not forced on it. Resume also
        lifts a halt."""
        state = self.states[agent_id]
        if state.paused != paused or (not paused and state.halted):
            state.paused = paused
            if not paused:
                state.halted = False
            self._agent_log(agent_id, "paused by the person" if paused else "resumed by the person")
            self._agent_changed(state)

    def halt(self, agent_id: str) -> None:
        """Stop the agent at its next hook: its next tool call is refused with an order
        to stop, and its turn ends without being kept going."""
        state = self.states[agent_id]
        if not state.halted:
            state.halted = True
            self._agent_log(agent_id, "halted by the person")
            self._agent_changed(state)

    async def archive(self, agent_id: str) -> None:
        """Take an agent off the floor: its CLI stops, mail to it bounces to the manager."""
        state = self.states[agent_id]
        session = self.supervisor.sessions.get(agent_id)
        if session is not None:
            await session.terminate()
        state.status = "archived"
        self._refloor()
        self._agent_log(agent_id, "archived by the person")
        self._agent_changed(state)

    async def spawn(self, agent_id: str) -> bool:
        """Start an agent that is not running (an archived one comes back to the floor)."""
        state = self.states[agent_id]
        if state.status == "archived":
            state.status = "offline"
            self._refloor()
        started = await self.supervisor.start(agent_id)
        self._agent_log(agent_id, "started by the person" if started else "could not be started")
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
                self._agent_log(
                    self.config.office.manager, f"answer not recorded on {message.task}: {e}"
                )
                return
            tasks.save_ledger(self.paths.tasks, ledger)
        self.committer.touch(self.paths.tasks)

    def _refloor(self) -> None:
        archived = frozenset(s.id for s in self.states.values() if s.status == "archived")
        self.router.floor = Floor.from_config(self.config, archived)

    async def answer(self, message: Message, text: str) -> None:
        """The person's answer to an escalation: recorded on the task's open question
        (if the message is about a task) and sent to the manager. The ledger lock and the
        mail files are worked on a thread, so the app's screen never waits on them."""
        await asyncio.to_thread(self._write_answer, message, text)
        self._request_scan(HUMAN)

    def _write_answer(self, message: Message, text: str) -> None:
        manager = self.config.office.manager
        human = self.paths.mailbox(HUMAN)
        in_human_inbox = find_message(human, message.id) is not None
        if message.task:
            self._record_answer(message, text)
        quote = (
            ""
            if in_human_inbox
            else f"\n\n(about {message.id} from {message.sender}: {message.subject})"
        )
        draft = Draft(
            to=manager,
            act="inform",
            subject=f"Answer: {message.subject or message.act}"[:SUBJECT_MAX],
            body=text + quote,
            task=message.task,
            # Only a message the person received can be replied to (the router checks).
            in_reply_to=message.id if in_human_inbox else None,
        )
        write_draft(human, draft)
        mark_done(human, message.id)

    async def _control(self, req: ControlRequest) -> ControlReply:
        if req.cmd == "status":
            registry = Registry(
                office=self.config.office.name,
                manager=self.config.office.manager,
                agents=[s.entry() for s in self.states.values()],
            )
            return ControlReply(ok=True, detail=msgspec.json.encode(registry).decode())
        state = self.states.get(req.agent or "")
        if state is None:
            return ControlReply(
                ok=False, error=f"no agent {req.agent!r} on the roster; see `hive roster`."
            )
        if req.cmd == "whoami":
            # A process claiming to be an agent proves it with that agent's current secret.
            if state.secret and req.secret and hmac.compare_digest(state.secret, req.secret):
                return ControlReply(ok=True, detail=state.id)
            return ControlReply(
                ok=False,
                error=f"this process cannot prove it is {state.id}: its HIVE_SECRET is not the "
                "one the office gave that agent.",
            )
        if req.cmd == "type":
            if (
                req.agent not in self.supervisor.sessions
                or not self.supervisor.sessions[state.id].alive
            ):
                why = (
                    state.missing or "it is not running (was the office started with --no-agents?)"
                )
                return ControlReply(ok=False, error=f"cannot type into {state.id}: {why}")
            await self.type_into(state.id, req.text, enter=req.enter)
            return ControlReply(ok=True)
        if req.cmd == "halt":
            self.halt(state.id)
        elif req.cmd == "archive":
            await self.archive(state.id)
        elif req.cmd == "spawn":
            if not await self.spawn(state.id):
                return ControlReply(
                    ok=False, error=f"{state.id} could not start: {state.missing or 'see hive log'}"
                )
        else:
            self.set_paused(state.id, req.cmd == "pause")
        return ControlReply(ok=True)

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
        self.write_registry()

    def write_registry(self) -> None:
        self._publish_registry(self._registry())

    def _registry(self) -> Registry:
        """On the loop: the agents' states are the loop's."""
        return Registry(
            office=self.config.office.name,
            manager=self.config.office.manager,
            agents=[state.entry() for state in self.states.values()],
        )

    def _publish_registry(self, registry: Registry) -> None:
        """On any thread (one at a time): an atomic write that ends in an fsync."""
        if registry != read_registry(self.paths):
            write_registry(self.paths, registry)
            self.committer.touch(self.paths.registry)

    # --- running --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        loop = self._loop = asyncio.get_running_loop()
        # Start-up reads and writes the whole home: on the route thread, so the app's
        # first frame is not held back by a backlog or a large hive.
        await loop.run_in_executor(self._route_thread, self._start_up)
        kick = await self._open_kick_socket()
        await self.hooks.start()
        await self.control.start()
        # The committer stops last, after the final routing pass, so its last commit
        # holds everything.
        commit_stop = asyncio.Event()
        committing = asyncio.create_task(
            self._supervised("commit", lambda: self.committer.run(commit_stop), commit_stop),
            name="commit",
        )
        bodies: dict[str, Callable[[], Awaitable[None]]] = {
            "watch": lambda: self._watch(stop),
            "route": lambda: self._route_loop(stop),
            "registry": lambda: self._registry_loop(stop),
            "wake": lambda: self.watchdog.run(stop),
            "memory": lambda: self.memory.run(stop),
        }
        loops = [
            asyncio.create_task(self._supervised(name, body, stop), name=name)
            for name, body in bodies.items()
        ]
        try:
            if self.with_agents:
                manager = self.config.office.manager
                first: dict[str, str] = {}
                if manager in self.states and not self.states[manager].spec.send_only:
                    team = [s.entry() for s in self.states.values()]
                    standup = standup_message(self.paths, self.config, team)
                    # In the inbox before the manager's CLI starts and reads its digest.
                    await loop.run_in_executor(
                        self._route_thread, self.router.post, manager, standup
                    )
                    first[manager] = FIRST_PROMPT
                await self.supervisor.start_all(first)
            await stop.wait()
        finally:
            self._wake.set()
            self._registry_dirty.set()
            await self.control.stop()
            await self.supervisor.stop_all()
            await self.hooks.stop()
            kick.close()
            self.paths.kick_socket.unlink(missing_ok=True)
            await asyncio.gather(*loops, return_exceptions=True)
            for state in self.states.values():
                if state.status not in ("offline", "archived"):
                    state.status = "exited"
            await loop.run_in_executor(self._route_thread, self._shut_down, self._registry())
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
        # Read every inbox once now, so the first hook or tick does not pay for it.
        self.plane.inboxes.refresh(list(self.states))

    def _shut_down(self, registry: Registry) -> None:
        """On the route thread, after every loop stopped: route what is left, publish
        the agents' last states."""
        self._guarded("route", self.router.scan_all)
        self._publish_registry(registry)

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
        self._registry_dirty.set()
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

    def _agent_log(self, agent_id: str, text: str) -> None:
        self.plane.log(LogEvent(ts=utc_now_iso(), kind="agent", agent=agent_id, detail=text))

    async def _registry_loop(self, stop: asyncio.Event) -> None:
        """Publish agent state at most every REGISTRY_INTERVAL_S (hooks fire in bursts)."""
        while not stop.is_set():
            await self._registry_dirty.wait()
            self._registry_dirty.clear()
            await asyncio.to_thread(self._publish_registry, self._registry())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REGISTRY_INTERVAL_S)

    async def _route_loop(self, stop: asyncio.Event) -> None:
        """Route kicked outboxes at once; sweep everything now and then. Each pass runs
        on the route thread; kicks that arrive meanwhile are gathered for the next one."""
        loop = self._loop = asyncio.get_running_loop()
        next_sweep = loop.time() + SWEEP_INTERVAL_S
        while not stop.is_set():
            timeout = max(0.0, next_sweep - loop.time())
            if self.router.deferred:
                timeout = min(timeout, WRITE_GRACE_S / 2)
            paused = self.router.paused
            if paused:
                timeout = min(timeout, DISK_RETRY_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            kicked, self._kicked = self._kicked, set()
            # While the disk is full, every pass is a sweep: it finishes the claims left.
            sweep = loop.time() >= next_sweep or paused is not None
            running = loop.run_in_executor(self._route_thread, self._route_pass, kicked, sweep)
            try:
                await asyncio.shield(running)
            except DiskFull as full:
                if paused is None:
                    self._office_log(str(full))
                self.health.report("disk", str(full))
            except asyncio.CancelledError:
                # Whoever routes next (the final pass at stop) must not overlap this one.
                with contextlib.suppress(Exception):
                    await running
                raise
            else:
                if paused is not None:
                    self._office_log("the disk has room again; routing resumed")
                    self.health.clear("disk")
            if sweep:
                next_sweep = loop.time() + SWEEP_INTERVAL_S

    def _route_pass(self, kicked: set[str], sweep: bool) -> None:
        """On the route thread. The reports of its scans are gathered, so the unread
        index reads the inboxes they filled once for the whole pass (_deliver)."""
        gathered: list[RouteStats] = []
        self._gathered = gathered
        try:
            for who in sorted(kicked):
                self.router.scan(who)
            for owner in {_owner(self.paths, p) for p in list(self.router.deferred)}:
                if owner:
                    self.router.scan(owner)
            if sweep:
                self.router.finish_claims()
                self.router.scan_all()
        finally:
            self._gathered = None
            self._deliver(gathered)

    def _request_scan(self, who: str) -> None:
        self._kicked.add(who)
        self._wake.set()

    async def _open_kick_socket(self) -> asyncio.DatagramTransport:
        path = self.paths.kick_socket
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)
        office = self

        class KickProtocol(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: object) -> None:
                office._request_scan(data[:64].decode("ascii", "replace"))

        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            KickProtocol, sock=sock
        )
        return transport

    async def _watch(self, stop: asyncio.Event) -> None:
        """Watch the hive until stopped. If the watcher fails it is logged and started
        again: without it the committer would miss changes nobody reports."""
        while not stop.is_set():
            try:
                await self._watch_once(stop)
            except Exception as exc:
                self.plane.log(
                    LogEvent(
                        ts=utc_now_iso(), kind="office", detail=f"hive watcher failed: {exc!r}"
                    )
                )
                await asyncio.sleep(1)

    async def _watch_once(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        hive = self.paths.hive
        git_dir = str(hive / ".git")

        def interesting(_change: Change, path: str) -> bool:
            # Claims (gitignored) and temp files (never committed, never memory) concern
            # no one but their writer, and are half the events of a routing burst.
            return not (
                path.startswith(git_dir)
                or "/outbox/.routing/" in path
                or os.path.basename(path).startswith(TEMP_PREFIX)
            )

        async for changes in awatch(
            hive,
            watch_filter=interesting,
            debounce=WATCH_DEBOUNCE_MS,
            step=WATCH_STEP_MS,
            stop_event=stop,
            recursive=True,
        ):
            # A routing burst is thousands of changes: sorted on a thread.
            outboxes, touched, news = await asyncio.to_thread(self._sort_changes, changes)
            for owner in sorted(outboxes):
                self._request_scan(owner)
            self.memory.changed(touched)
            if news:
                self._tell(self.listeners.hive, news)

    def _sort_changes(
        self, changes: set[tuple[Change, str]]
    ) -> tuple[set[str], set[Path], set[Path]]:
        """Outboxes with new files, every changed path (told to the committer here), and
        what of it the hive listeners get: not the router's own work (outboxes, claims,
        archives, deliveries into inboxes), which it reports itself with recipients. Only
        readers take files out of an inbox, and that the listeners must still hear of.

        A file the router created and reported is already with the committer and memory:
        its `added` is left out (plain string work, half the events of a burst). Anything
        else that happens to it afterwards is a change of its own and is told."""
        prefix = os.path.join(self.paths.hive, "")
        since = time.monotonic() - REPORTED_FOR_S
        with self._reported_lock:
            reported = self._reported
            fresh = [
                (change, raw)
                for change, raw in changes
                if not (change == Change.added and reported.pop(raw, 0.0) > since)
            ]
            for _, raw in changes:
                reported.pop(raw, None)
        outboxes: set[str] = set()
        touched: set[Path] = set()
        news: set[Path] = set()
        for change, raw in fresh:
            path = Path(raw)
            touched.add(path)
            parts = raw[len(prefix) :].split("/") if raw.startswith(prefix) else []
            parent = parts[-2] if len(parts) >= 2 else None
            if len(parts) >= 3 and parts[0] == "agents" and parts[2] == "outbox":
                owner: str | None = parts[1]
            elif len(parts) >= 2 and parts[0] == HUMAN and parts[1] == "outbox":
                owner = HUMAN
            else:
                owner = None
            if owner is not None:
                if change != Change.deleted and parent == "outbox":
                    outboxes.add(owner)
            elif not (change == Change.added and parent == "inbox"):
                news.add(path)
        self.committer.touch(*touched)
        return outboxes, touched, news

    def _post(self, recipient: str, message: Message) -> None:
        """An office notice, written on the route thread: its atomic write ends in an
        fsync (5-30 ms here), and one wake tick may post one per hookless agent."""
        self._loop = asyncio.get_running_loop()
        future = self._route_thread.submit(self.router.post, recipient, message)
        future.add_done_callback(self._posted)

    def _posted(self, future: concurrent.futures.Future[None]) -> None:
        if (exc := future.exception()) is not None:
            self._office_log(f"a notice could not be posted: {exc!r}")

    def _routed(self, stats: RouteStats) -> None:
        """The router's report of one pass: from the route thread, or from the loop for
        the office's own notices and the passes at start and stop."""
        # The committer is thread-safe, and a burst touches thousands of paths.
        self.committer.touch(*stats.touched)
        for kind, _who in stats.notes:
            self.committer.note(kind)
        loop = self._loop
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or loop.is_closed() or here is loop:
            self._apply_routed(stats)  # on the loop, or no loop runs the office
            return
        now = time.monotonic()
        with self._reported_lock:
            if len(self._reported) > REPORTED_MAX:
                self._reported.clear()
            self._reported.update((str(path), now) for path in stats.touched)
        if self._gathered is not None:
            self._gathered.append(stats)  # delivered at the end of the route pass
        else:
            self._deliver([stats])

    def _deliver(self, reports: list[RouteStats]) -> None:
        """On the route thread: hand reports to the loop. The new mail is read into the
        unread index first: the wake tick that follows (and every hook) asks for it there."""
        loop = self._loop
        if loop is None or loop.is_closed():
            for stats in reports:
                self._apply_routed(stats)  # no loop runs the office any more
            return
        inboxes: set[str] = set().union(*(stats.inboxes for stats in reports))
        self.plane.inboxes.refresh(sorted(inboxes & self.states.keys()))
        for stats in reports:
            loop.call_soon_threadsafe(self._apply_routed, stats)

    def _apply_routed(self, stats: RouteStats) -> None:
        self.memory.changed(stats.touched)
        # The router knows exactly what it wrote: tell listeners now, not when (or if)
        # the watcher gets round to it.
        self._tell(self.listeners.routed, stats)
        if stats.routes:
            self.watchdog.poke()


def _owner(paths: HivePaths, path: Path) -> str | None:
    """Whose outbox a path is in (an agent id or `human`), or None."""
    try:
        rel = path.relative_to(paths.hive).parts
    except ValueError:
        return None
    if len(rel) >= 3 and rel[0] == "agents" and rel[2] == "outbox":
        return rel[1]
    if len(rel) >= 2 and rel[0] == HUMAN and rel[1] == "outbox":
        return HUMAN
    return None
