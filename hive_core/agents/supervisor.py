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
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path

import msgspec

import cth_hook
from hive_core.agents.identity import identity_text, system_prompt
from hive_core.agents.paste import pasted
from hive_core.agents.provider import LaunchContext, Provider
from hive_core.agents.pty_session import PtySession
from hive_core.agents.state import AgentStates
from hive_core.fsio import atomic_write
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, OfficeConfig

# A CLI that dies this fast did not start: a resumed session could not be resumed (it
# is started afresh, once); a new one cannot start at all (no login, a bad command), so
# it is left exited with what to do rather than started into the same failure.
QUICK_EXIT_S = 15.0
DEFAULT_SIZE = (40, 120)

OutputSink = Callable[[str, bytes], None]


def hook_command() -> list[str]:
    """How agent CLIs run the shim: the venv's interpreter on the shim's file, isolated
    (-I: no PYTHON* variables or user site) and without site start-up (-S), which
    makes a hook about 10 ms faster than the console-script wrapper."""
    return [sys.executable, "-I", "-S", str(Path(cth_hook.__file__).parent / "__main__.py")]


def tool_path() -> list[str]:
    """Folders that must come first on an agent's PATH so `hive` and `cth-hook` resolve."""
    return [str(Path(sys.executable).parent)]


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
    ) -> None:
        self.paths = paths
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

    def _background(self, coro: Coroutine[object, object, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def missing_cli(self, agent_id: str) -> str | None:
        """Why this agent's CLI cannot start (not installed), or None."""
        state = self.states[agent_id]
        provider = self.providers[state.spec.provider]
        program = provider.executable(state.spec)
        search = os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
        if shutil.which(program, path=search) is None:
            return f"`{program}` is not installed. {provider.install_hint()}"
        return None

    async def start_all(self, first_prompts: Mapping[str, str] | None = None) -> None:
        """The manager first (it gets the first turn), then the rest in roster order."""
        order = sorted(self.states.values(), key=lambda s: not s.manager)
        for state in order:
            if state.status != "archived" and not state.spec.archived and not state.spec.send_only:
                await self.start(state.id, first_prompt=(first_prompts or {}).get(state.id))

    async def start(
        self, agent_id: str, *, fresh: bool = False, first_prompt: str | None = None
    ) -> bool:
        state = self.states[agent_id]
        if agent_id in self.sessions and self.sessions[agent_id].alive:
            return True
        if agent_id in self._starting:  # its spawn is under way
            return True
        with self.states.edit(agent_id):
            state.missing = self.missing_cli(agent_id)
            state.start_failed = None
            if state.missing:
                state.status = "exited"
        if state.missing:
            self.log(agent_id, f"cannot start: {state.missing}")
            return False
        spec = state.spec
        if self.workplace is not None:
            self._starting.add(agent_id)
            try:
                where = await self.workplace(spec)
            finally:
                self._starting.discard(agent_id)
            if where is not None:
                spec = msgspec.structs.replace(spec, cwd=str(where))
        resume = bool(state.session_id) and not fresh
        session_id = state.session_id if resume and state.session_id else str(uuid.uuid4())
        ctx = LaunchContext(
            paths=self.paths,
            agent=spec,
            secret=state.new_secret(),
            session_id=session_id,
            resume=resume,
            system_prompt=system_prompt(state.spec, self.config, self.paths),
            hook_command=hook_command(),
            path_prepend=tool_path(),
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
        launch = self.providers[state.spec.provider].prepare(ctx)
        launch.cwd.mkdir(parents=True, exist_ok=True)
        rows, cols = self.sizes.get(agent_id, self.size)
        self._starting.add(agent_id)
        try:
            session = await PtySession.start(
                launch.argv, env=launch.env, cwd=launch.cwd, rows=rows, cols=cols
            )
        finally:
            self._starting.discard(agent_id)
        self.sessions[agent_id] = session
        self._started_at[agent_id] = time.monotonic()
        provider = self.providers[state.spec.provider]
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
        return True

    async def stop_all(self) -> None:
        await asyncio.gather(
            *(s.terminate() for s in self.sessions.values()), return_exceptions=True
        )

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
        for sink in self.sinks:
            sink(agent_id, data)

    def _exited(self, agent_id: str, resumed: bool, code: int | None, sig: int | None) -> None:
        state = self.states[agent_id]
        # Whatever the agent left running in its terminal goes with it.
        self._background(self.sessions[agent_id].terminate())
        how = f"exit {code}" if code is not None else f"signal {sig}"
        self.log(agent_id, f"exited ({how})")
        lived = time.monotonic() - self._started_at.get(agent_id, 0)
        # A signal is the office's own stop or archive (or the person's kill), not a
        # failure to start.
        failed = lived < QUICK_EXIT_S and code not in (0, None)
        with self.states.edit(agent_id):
            state.pid = None
            state.exit_status = code if code is not None else (-sig if sig else None)
            state.status = "exited"
            if failed and resumed:
                # The session could not be resumed (its transcript is gone, say): start afresh.
                state.session_id = None
            elif failed:
                hint = self.providers[state.spec.provider].start_hint()
                state.start_failed = (
                    f"exited (code {code}) right after it started ({lived:.1f} s). {hint}"
                )
        if failed and resumed:
            self.log(agent_id, "could not resume its session; starting a new one")
            self._background(self.start(agent_id, fresh=True))
        elif failed:
            self.log(agent_id, f"could not start: {state.start_failed}")
