"""Starting and stopping the roster's agent CLIs, each in its own pty.

The supervisor mints each start's secret, writes identity.md, asks the provider for the
launch, spawns it, and keeps the pty read (a child whose output nobody reads would
stall). Output goes to whoever listens (the app's panes, subscribed before any agent
starts); without a listener it is dropped: nothing is kept per chunk.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path

import msgspec

from hive_client.client import CONTAINED_ENV
from hive_core.agents import gemini
from hive_core.agents.identity import identity_text, system_prompt
from hive_core.agents.login import (
    ClaudeLogin,
    LoginReader,
    desk_env,
    first_claude,
    first_desk,
    office_sentence,
    waiting_notice,
)
from hive_core.agents.provider import Launch, LaunchContext, Provider, hook_command, tool_path
from hive_core.desks import contain
from hive_core.desks.paste import pasted
from hive_core.desks.pty_session import PtySession
from hive_core.desks.state import AgentStates
from hive_core.fsio import atomic_write
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.remote.launch import LinkFailed, RemoteHomes, remote_launch, remote_log_reason
from hive_core.remote.ssh import SSH_FAILED
from hive_core.schema import AgentSpec, OfficeConfig
from hive_core.status import LinkDown
from hive_core.worktrees.plan import branch_name

# A CLI that dies this fast did not start: a resumed session could not be resumed (it
# is started afresh, once); a new one cannot start at all (no login, a bad command), so
# it is left exited with what to do rather than started into the same failure.
QUICK_EXIT_S = 15.0
# How often claude desks waiting for a login look again (a few stat calls each time).
LOGIN_POLL_S = 2.0
# The health component whose one line says what the claude desks waiting for a login
# need; a desk that exited for want of one says only this and is folded into that line.
LOGIN_COMPONENT = "login"
NO_LOGIN_HINT = "No Claude login yet: it starts again by itself once one is there."
DEFAULT_SIZE = (40, 120)

OutputSink = Callable[[str, bytes], None]
# (agent id, subject, text): a notice to the manager (a host that stays down).
TellManager = Callable[[str, str, str], None]
# (component, detail): a problem of the office (None: it cleared), as health.py keeps them.
Report = Callable[[str, str | None], None]
STARTED_AT_ONCE = "right after it started"


def start_failure(code: int | None, lived: float, hint: str) -> str:
    """What a CLI that exited as soon as it started shows (its title, health, doctor)."""
    return f"exited (code {code}) {STARTED_AT_ONCE} ({lived:.1f} s). {hint}"


def start_failure_cause(detail: str) -> str | None:
    """The hint of a `start_failure` text (what several desks failing alike share), or
    None for any other text."""
    head, sep, hint = detail.partition(" s). ")
    return hint if sep and STARTED_AT_ONCE in head else None


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class Supervisor:
    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        states: AgentStates,
        providers: Mapping[str, Provider],
        *,
        log: Callable[[str, str], None],
        workplace: Callable[[AgentSpec], Awaitable[Path | None]] | None = None,
        tell_manager: TellManager | None = None,
        report: Report | None = None,
    ) -> None:
        self.paths = paths
        self.report = report
        # Whether a claude desk finds a login (hive_core/agents/login.py).
        self.login = LoginReader()
        # Claude desks that wait for the login the first claude desk's pane asks for,
        # and the pass that starts them once it exists.
        self.awaiting_login: set[str] = set()
        self._login_watch: asyncio.Task[object] | None = None
        # Where an agent starts instead of its roster cwd (its git worktree), or None.
        self.workplace = workplace
        self.config = config
        self.states = states
        self.providers = providers
        self.log = log
        self.sessions: dict[str, PtySession] = {}
        self.sinks: list[OutputSink] = []
        self._started_at: dict[str, float] = {}
        self._starting: set[str] = set()
        self.size = DEFAULT_SIZE
        self.sizes: dict[str, tuple[int, int]] = {}
        self.last_output: dict[str, float] = {}
        # The loop keeps only weak references to tasks; these must not vanish mid-way.
        self._tasks: set[asyncio.Task[object]] = set()
        # Remote desks: each host's $HOME, the desks whose link is down (what the
        # explained status shows), their pending reconnect, and the hosts the manager
        # was told are down (until one of their desks is back).
        self.tell_manager = tell_manager
        self.homes = RemoteHomes()
        self.links: dict[str, LinkDown] = {}
        self._reconnects: dict[str, asyncio.Task[object]] = {}
        self._told_hosts: set[str] = set()
        self._tails: dict[str, bytes] = {}
        # CLIs the office itself is stopping: their exit is no failure and no drop.
        self._ending: set[str] = set()

    def _background(self, coro: Coroutine[object, object, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def missing_cli(self, agent_id: str) -> str | None:
        """Why this agent's CLI cannot start (not installed), or None. A remote desk's
        CLI is looked for on its host (doctor), not here."""
        state = self.states[agent_id]
        if state.spec.host:
            return (
                None if shutil.which("ssh") else "`ssh` is not installed. Install OpenSSH's client."
            )
        provider = self.providers[state.spec.provider]
        program = provider.executable(state.spec)
        search = os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
        if shutil.which(program, path=search) is None:
            return f"`{program}` is not installed. {provider.install_hint()}"
        return None

    def _startable(self) -> list[str]:
        """The desks the office starts, the manager first (it gets the first turn),
        then the rest in roster order."""
        order = sorted(self.states.values(), key=lambda s: not s.manager)
        return [
            s.id
            for s in order
            if s.status != "archived" and not s.spec.archived and not s.spec.send_only
        ]

    async def start_all(self, first_prompts: Mapping[str, str] | None = None) -> None:
        for agent_id in self._startable():
            await self.start(
                agent_id, first_prompt=(first_prompts or {}).get(agent_id), login_gate=True
            )

    async def start(
        self,
        agent_id: str,
        *,
        fresh: bool = False,
        first_prompt: str | None = None,
        login_gate: bool = False,
    ) -> bool:
        """`login_gate`: a claude desk that would find no login (or a question Claude
        Code asks on a first run) waits for the first claude desk's pane to settle it,
        rather than asking again in its own (the office's start; the person's own start
        of a desk does not wait)."""
        # Started by anyone else than the reconnect loop: that loop is done.
        self.cancel_reconnect(agent_id)
        return await self._start(
            agent_id, fresh=fresh, first_prompt=first_prompt, login_gate=login_gate
        )

    async def _start(
        self,
        agent_id: str,
        *,
        fresh: bool = False,
        first_prompt: str | None = None,
        login_gate: bool = False,
    ) -> bool:
        state = self.states[agent_id]
        if agent_id in self.sessions and self.sessions[agent_id].alive:
            return True
        if agent_id in self._starting:  # its spawn is under way
            return True
        self.awaiting_login.discard(agent_id)
        waiting = self._login_wait(agent_id) if login_gate else None
        with self.states.edit(agent_id):
            state.missing = self.missing_cli(agent_id) or waiting
            state.start_failed = None
            held = waiting is not None and state.missing == waiting
            if state.missing and not held:  # not installed: an exit, with its reason
                state.status = "exited"
        if held:
            self.awaiting_login.add(agent_id)
            self.log(agent_id, f"not started yet: {waiting}")
            self._watch_login()
            return False
        if state.missing:
            self.log(agent_id, f"cannot start: {state.missing}")
            return False
        spec = state.spec
        # A remote desk's worktree lives on its host (`where` is a folder there); a host
        # that cannot be reached is a link down like a failed prepare: starting in the
        # roster cwd would put the agent in the person's own checkout.
        if self.workplace is not None:
            self._starting.add(agent_id)
            try:
                where = await self.workplace(spec)
            except LinkFailed as exc:
                self._link_down(agent_id, str(exc))
                return False
            finally:
                self._starting.discard(agent_id)
            if where is not None:
                spec = msgspec.structs.replace(spec, cwd=str(where))
        resume = bool(state.session_id) and not fresh
        session_id = state.session_id if resume and state.session_id else str(uuid.uuid4())
        hooks, tools = hook_command(), tool_path()
        secret = state.new_secret()
        remote_home = None
        if spec.host is not None:
            self._starting.add(agent_id)
            try:
                remote_home = await self.homes.home(spec, self.paths)
            except LinkFailed as exc:
                self._link_down(agent_id, str(exc))
                return False
            finally:
                self._starting.discard(agent_id)
            venv_bin = plan.remote_venv_bin(self.config.office.remote_venv, remote_home)
            hooks, tools = [f"{venv_bin}/cth-hook"], [venv_bin]
        ctx = LaunchContext(
            paths=self.paths,
            agent=spec,
            secret=secret,
            session_id=session_id,
            resume=resume,
            system_prompt=system_prompt(state.spec, self.config, self.paths),
            hook_command=hooks,
            path_prepend=tools,
            base_env={k: v for k, v in os.environ.items() if not k.startswith("HIVE_")},
            first_prompt=first_prompt,
        )
        mailbox = self.paths.mailbox(agent_id)
        identity = identity_text(state.spec, self.config).encode()
        if _read_or_none(mailbox.identity) != identity:
            # Derived from office.toml and brought up to date at every start, so a write a
            # crash loses costs nothing: no fsync (one per agent was most of a 50-agent
            # office's start-up on the event loop).
            atomic_write(mailbox.identity, identity, fsync=False)
        provider = self.providers[state.spec.provider]
        launch = provider.prepare(ctx)
        if remote_home is not None:
            try:
                launch, script = remote_launch(
                    launch,
                    spec,
                    self.paths,
                    remote_home=remote_home,
                    remote_venv=self.config.office.remote_venv,
                    executable=provider.executable(spec),
                    office_env=os.environ,
                )
            except plan.ShipError as exc:
                with self.states.edit(agent_id):
                    state.status = "exited"
                    state.start_failed = f"could not be sent to {spec.host}: {exc}"
                self.log(agent_id, f"could not start: {state.start_failed}")
                return False
            # The secret, the environment and the files go over prepare's stdin: an argv
            # (the ssh command) is readable by every user of both machines.
            self._starting.add(agent_id)
            try:
                await self.homes.prepare(spec, self.paths, remote_home, script)
            except LinkFailed as exc:
                self._link_down(agent_id, str(exc))
                return False
            finally:
                self._starting.discard(agent_id)
        launch.cwd.mkdir(parents=True, exist_ok=True)
        self._starting.add(agent_id)
        try:
            confine, uncontained = await asyncio.to_thread(self._containment, spec, launch)
            # The size asked for now: a client attaching while the CLI starts resizes it
            # during the awaits here, and a pty started at the old size would keep it.
            rows, cols = self.sizes.get(agent_id, self.size)
            session = await PtySession.start(
                launch.argv, env=launch.env, cwd=launch.cwd, rows=rows, cols=cols, confine=confine
            )
        finally:
            self._starting.discard(agent_id)
        self.sessions[agent_id] = session
        if (wanted := self.sizes.get(agent_id, self.size)) != (rows, cols):
            session.resize(*wanted)  # asked for while the child was spawned
        self._started_at[agent_id] = time.monotonic()
        loop = asyncio.get_running_loop()
        session.attach(
            loop,
            functools.partial(self._output, agent_id),
            functools.partial(self._exited, agent_id, resume),
        )
        self.log(
            agent_id,
            f"started {' '.join(launch.argv[:1])} (pid {session.pid}"
            f"{', resuming ' + session_id if resume else ''})",
        )
        with self.states.edit(agent_id):
            state.pid = session.pid
            # A hookless CLI sends no SessionStart: its process is all there is to know.
            state.status = "running" if provider.hookless else "offline"
            state.stop_blocks = 0
            state.exit_status = None
            state.uncontained = uncontained
        if uncontained is not None:
            self.log(agent_id, f"runs uncontained: {uncontained}")
        return True

    def _containment(
        self, spec: AgentSpec, launch: Launch
    ) -> tuple[tuple[contain.Grant, ...] | None, str | None]:
        """The Landlock grants this desk's CLI runs under (contain.py), or why it runs
        uncontained. A contained desk's TMPDIR is its own folder, and its CLI's own
        sandbox is off (both set in `launch`)."""
        if spec.host is not None:
            return None, f"it runs on {spec.host}: the office contains only this machine's desks"
        if not self.config.office.contain:
            return None, "office.toml says contain = false"
        why = contain.unavailable(contain.abi()) or contain.cli_problem(spec.provider, launch.env)
        if why is not None:
            return None, why
        try:
            mailboxes = [e.name for e in os.scandir(self.paths.agents_dir) if e.is_dir()]
        except OSError:
            mailboxes = []
        roster = {*(a.id for a in self.config.agents), *mailboxes}
        elsewhere = [a.cwd for a in self.config.agents if a.id != spec.id and a.host is None]
        # A worktree's git writes in the repository of the roster's folder, on the branch
        # the office named for the desk (worktrees/plan.py).
        branch = branch_name(self.config.office.name, str(self.paths.home), spec.id)
        git = (Path(self.states[spec.id].spec.cwd).expanduser(), branch)
        folders = contain.desk_folders(
            self.paths, spec.id, spec.provider, launch.cwd, roster, launch.env, elsewhere, git
        )
        plan = contain.plan(folders, contain.listings(contain.to_list(folders.hidden)))
        if plan.refused is not None:
            return None, plan.refused
        tmp = self.paths.desk_tmp(spec.id)
        tmp.mkdir(parents=True, exist_ok=True)
        launch.env["TMPDIR"] = str(tmp)
        launch.env[CONTAINED_ENV] = "1"
        launch.argv[:] = contain.contained_argv(spec.provider, launch.argv)
        return plan.grants, None

    async def stop_all(self) -> None:
        for agent_id in list(self._reconnects):
            self.cancel_reconnect(agent_id)
        if self._login_watch is not None:
            self._login_watch.cancel()
        await asyncio.gather(
            *(self.terminate(a) for a in list(self.sessions)), return_exceptions=True
        )

    async def terminate(self, agent_id: str) -> None:
        """The office stops this CLI (its own stop, an archive): an end, not a failure;
        for a remote desk, not a dropped link (ssh exits 255 on the SIGTERM too)."""
        session = self.sessions.get(agent_id)
        if session is None:
            return
        self.cancel_reconnect(agent_id)
        self._ending.add(agent_id)
        await session.terminate()

    def write(self, agent_id: str, data: bytes) -> None:
        session = self.sessions.get(agent_id)
        if session and session.alive:
            session.write(data)

    def paste(self, agent_id: str, text: str) -> None:
        """Type `text` as a paste: bracketed if the agent's program asked for it."""
        session = self.sessions.get(agent_id)
        if session and session.alive:
            session.write(pasted(text, session.bracketed_paste))

    def resize(self, rows: int, cols: int, agent_id: str | None = None) -> None:
        """Resize one agent's terminal (or all); remembered for an agent not started yet."""
        if agent_id is None:
            self.size = (rows, cols)
            self.sizes.clear()
        else:
            self.sizes[agent_id] = (rows, cols)
        for aid, session in self.sessions.items():
            if (agent_id is None or aid == agent_id) and session.alive:
                session.resize(rows, cols)

    def started_ago(self, agent_id: str) -> float | None:
        """Seconds since the agent's CLI was last started (None: never)."""
        started = self._started_at.get(agent_id)
        return None if started is None else time.monotonic() - started

    def quiet_for(self, agent_id: str) -> float:
        """Seconds since the agent's pane last printed (since its start if never)."""
        last = self.last_output.get(agent_id, self._started_at.get(agent_id, 0.0))
        return time.monotonic() - last

    def _output(self, agent_id: str, data: bytes) -> None:
        self.last_output[agent_id] = time.monotonic()
        if self.states[agent_id].spec.host:
            # ssh says why a link broke on the terminal: keep the end to find it.
            tail = self._tails.get(agent_id, b"") + data
            self._tails[agent_id] = tail[-plan.TAIL_BYTES :]
        # ssh's own messages go to its -E log: output is the host speaking, the link is up.
        if agent_id in self.links:
            self._link_up(agent_id)
        for sink in self.sinks:
            sink(agent_id, data)

    def _exited(self, agent_id: str, resumed: bool, code: int | None, sig: int | None) -> None:
        state = self.states[agent_id]
        # Whatever the agent left running in its terminal goes with it.
        self._background(self.sessions[agent_id].terminate())
        how = f"exit {code}" if code is not None else f"signal {sig}"
        self.log(agent_id, f"exited ({how})")
        if agent_id in self._ending:
            self._ending.discard(agent_id)
            self.links.pop(agent_id, None)
            with self.states.edit(agent_id):
                state.pid = None
                state.exit_status = code if code is not None else (-sig if sig else None)
                if state.status != "archived":
                    state.status = "exited"
            return
        if state.spec.host and code == SSH_FAILED:
            # The link failed, not the CLI: no "could not start", but a reconnect.
            with self.states.edit(agent_id):
                state.pid = None
                state.exit_status = code
            said = plan.tail_reason(self._tails.pop(agent_id, b""))
            self._link_down(
                agent_id,
                remote_log_reason(self.paths, agent_id, said or "the ssh connection ended"),
            )
            return
        lived = time.monotonic() - self._started_at.get(agent_id, 0)
        # A signal is the office's own stop or archive (or the person's kill), not a
        # failure to start.
        failed = lived < QUICK_EXIT_S and code not in (0, None)
        no_login = failed and self._lacks_login(agent_id)
        with self.states.edit(agent_id):
            state.pid = None
            state.exit_status = code if code is not None else (-sig if sig else None)
            state.status = "exited"
            if failed and resumed:
                # The session could not be resumed (its transcript is gone, say): start afresh.
                state.session_id = None
            elif failed:
                hint = (
                    NO_LOGIN_HINT if no_login else self.providers[state.spec.provider].start_hint()
                )
                state.start_failed = start_failure(code, lived, hint)
        if failed and resumed:
            self.log(agent_id, "could not resume its session; starting a new one")
            self._background(self.start(agent_id, fresh=True))
        elif failed:
            self.log(agent_id, f"could not start: {state.start_failed}")
            if no_login:  # started again, once, when the login is there
                self.awaiting_login.add(agent_id)
                self._watch_login()

    # --- claude desks waiting for a login ---------------------------------------------

    def _claude_here(self, agent_id: str) -> bool:
        spec = self.states[agent_id].spec
        return self.providers[spec.provider].name == "claude" and spec.host is None

    def login_desk(self) -> str | None:
        specs = [s.spec for s in self.states.values() if s.status != "archived"]
        first = first_claude(specs, self.config.office.manager)
        return None if first is None else first.id

    def _desk_login(self, agent_id: str, first: str | None = None) -> ClaudeLogin:
        """The login this desk would find; with `first`, also whether the person has
        answered Claude Code's trust question in that desk's pane (for its repository:
        the desks' worktrees share the answer)."""
        folder = None if first is None else Path(self.states[first].spec.cwd).expanduser()
        return self.login(desk_env(self.states[agent_id].spec.env), folder)

    def _gemini_first(self, agent_id: str) -> str | None:
        """The gemini desk whose pane asks for the sign-in that this local gemini desk
        would ask for too (None: it would not ask, it is that desk, or it is no local
        gemini desk). Gemini keeps the sign-in in the office's shared login file
        (gemini.share_login), so one pane asking serves every desk."""
        spec = self.states[agent_id].spec
        if self.providers[spec.provider].name != "gemini" or spec.host is not None:
            return None
        specs = [s.spec for s in self.states.values() if s.status != "archived"]
        first = first_desk(specs, self.config.office.manager, spec.provider)
        if first is None or first.id == agent_id:
            return None
        if gemini.auth_type(desk_env(spec.env)) is not None:
            return None
        if gemini.selected_type(gemini.read_settings(gemini.settings_file(self.paths, agent_id))):
            return None  # it signed in before
        return None if gemini.sign_in_elsewhere(self.paths, agent_id) else first.id

    def _login_wait(self, agent_id: str) -> str | None:
        """What this desk waits for before it starts (None: it starts now)."""
        if (signing := self._gemini_first(agent_id)) is not None:
            return (
                f"it waits for the Gemini sign-in in {self.states[signing].spec.name}'s pane "
                "(Gemini asks once; the office shares the sign-in with its gemini desks)"
            )
        first = self.login_desk()
        if first is None or first == agent_id or not self._claude_here(agent_id):
            return None
        login = self._desk_login(agent_id, first)
        return None if login.ready else waiting_notice(login, self.states[first].spec.name)

    def _login_sentence(self, agent_id: str) -> str | None:
        """What to do while a claude desk waits for what the first desk's pane asks
        (None: nothing to wait for, or it is no local claude desk)."""
        if (signing := self._gemini_first(agent_id)) is not None:
            return (
                f"Sign in to Gemini once in {self.states[signing].spec.name}'s pane (or give "
                "the desks GEMINI_API_KEY): the other gemini desks start with that sign-in."
            )
        first = self.login_desk()
        if first is None or not self._claude_here(agent_id):
            return None
        login = self._desk_login(agent_id, first)
        if login.ready:
            return None
        return office_sentence(login, self.states[first].spec.name, self.paths)

    def _lacks_login(self, agent_id: str) -> bool:
        """A local claude desk that would find no login at all."""
        return self._claude_here(agent_id) and self._desk_login(agent_id).source is None

    def _watch_login(self) -> None:
        if self._login_watch is None or self._login_watch.done():
            self._login_watch = asyncio.get_running_loop().create_task(self._await_login())

    async def _await_login(self) -> None:
        """Start each waiting desk (and one that exited for want of a login) once its
        login is there; meanwhile the office shows one line saying what to do."""
        said: str | None = None
        try:
            while True:
                for agent_id in sorted(self.awaiting_login):
                    state = self.states[agent_id]
                    if state.status == "archived" or state.spec.archived:
                        self.awaiting_login.discard(agent_id)
                    elif self._login_wait(agent_id) is None and not self._lacks_login(agent_id):
                        self.log(agent_id, "a login is there: starting")
                        await self._start(agent_id)
                if not self.awaiting_login:
                    return
                waiting = min(self.awaiting_login)
                sentence = self._login_sentence(waiting)
                if sentence is not None and sentence != said:
                    # Once in the log too: `hive-office serve` has no screen to show it.
                    self.log(self.login_desk() or waiting, sentence)
                    said = sentence
                if self.report is not None:
                    self.report(LOGIN_COMPONENT, sentence)
                await asyncio.sleep(LOGIN_POLL_S)
        finally:
            if self.report is not None:
                self.report(LOGIN_COMPONENT, None)

    # --- remote desks: a dropped link and the reconnect -----------------------------------

    def _link_down(self, agent_id: str, reason: str) -> None:
        """The desk's link failed (a drop, or its prepare): show it disconnected and try
        again after the backoff; tell the manager once of a host that stays down."""
        state = self.states[agent_id]
        host = state.spec.host or "?"
        before = self.links.get(agent_id)
        failures = before.failures + 1 if before is not None else 1
        step = plan.reconnect_plan(failures, host in self._told_hosts)
        stopped = "the person paused it" if state.paused else None
        if state.status == "archived":
            stopped = "it is archived"
        self.links[agent_id] = LinkDown(
            reason=reason,
            at=time.time(),
            failures=failures,
            delay=None if stopped else step.delay,
            stopped=stopped,
        )
        with self.states.edit(agent_id):
            if state.status != "archived":
                state.status = "disconnected"
        self.log(
            agent_id,
            f"link to {host} down ({reason}); "
            + (f"not reconnecting: {stopped}" if stopped else f"reconnecting in {step.delay:g} s"),
        )
        if step.tell:
            self._told_hosts.add(host)
            subject, text = plan.tell_text(host, agent_id, failures, reason)
            self.log(agent_id, f"told the manager: {subject}")
            if self.tell_manager is not None:
                self.tell_manager(agent_id, subject, text)
        if stopped is None:
            self.cancel_reconnect(agent_id)
            task = asyncio.get_running_loop().create_task(self._reconnect(agent_id, step.delay))
            self._reconnects[agent_id] = task
            task.add_done_callback(
                lambda t: (
                    self._reconnects.pop(agent_id, None)
                    if self._reconnects.get(agent_id) is t
                    else None
                )
            )

    async def _reconnect(self, agent_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        state = self.states[agent_id]
        # The person's pause or archive since the drop cancels the reconnect.
        if state.status != "disconnected" or state.paused:
            link = self.links.get(agent_id)
            if link is not None and state.status == "disconnected":
                self.links[agent_id] = msgspec.structs.replace(
                    link, delay=None, stopped="the person paused it"
                )
                with self.states.edit(agent_id):
                    pass  # the explained status reads the link: announce it
            return
        # Not start(): that would cancel this very task.
        await self._start(agent_id)

    def cancel_reconnect(self, agent_id: str) -> None:
        """Stop trying to reconnect this desk (the person stopped or started it)."""
        task = self._reconnects.pop(agent_id, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _link_up(self, agent_id: str) -> None:
        link = self.links.pop(agent_id, None)
        host = self.states[agent_id].spec.host
        if host is not None:
            self._told_hosts.discard(host)
        if link is not None:
            self.log(agent_id, f"link to {host} is back (after {link.failures} failed)")
