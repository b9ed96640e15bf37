"""What the agents' tokens cost: one price table, and sums per agent, per task and per day.

Everything here but `LedgerHistory` and `CostWatch` is pure. Usage records come from agents/usage.py; a
task's share is the usage of its assignee while it held the task, read from the
ledger's history in the hive's git (each commit's tasks.json) and the file as it is now.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from hive_core.agents.usage import Tokens, UsageBook, UsageRecord, merged_sessions
from hive_core.cost.remote_usage import RemoteUsage
from hive_core.fsio import UnsafeFile, atomic_write, open_regular
from hive_core.ids import utc_now_iso
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ModelPrice, OfficeConfig, Task
from hive_core.team.tasks import LedgerError, parse_ledger, tasks_of

if TYPE_CHECKING:
    import pygit2

    from hive_core.agents.provider import Provider


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


# List prices per model family (a model id is priced by the longest family it starts
# with), as Anthropic and OpenAI published them in November 2025: check them against
# the providers' pricing pages; office.toml's `[prices."<family>"]` overrides any of them
# and adds families. Anthropic's cache write is the 5-minute one (1.25x input); OpenAI
# has no cache-write charge, and its cached input is the cache read.
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50),
    "claude-opus-4-1": Price(input=15.0, output=75.0, cache_write=18.75, cache_read=1.50),
    "claude-opus-4": Price(input=15.0, output=75.0, cache_write=18.75, cache_read=1.50),
    "claude-sonnet-4": Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
    "claude-haiku-4-5": Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
    "claude-3-5-haiku": Price(input=0.80, output=4.0, cache_write=1.0, cache_read=0.08),
    "gpt-5": Price(input=1.25, output=10.0, cache_write=0.0, cache_read=0.125),
    "gpt-5-codex": Price(input=1.25, output=10.0, cache_write=0.0, cache_read=0.125),
    "gpt-5-mini": Price(input=0.25, output=2.0, cache_write=0.0, cache_read=0.025),
    "gpt-5-nano": Price(input=0.05, output=0.40, cache_write=0.0, cache_read=0.005),
}


def price_table(overrides: Mapping[str, ModelPrice]) -> dict[str, Price]:
    """The built-in table with office.toml's prices over it: a key an override leaves out
    keeps the built-in price (0 for a family the table does not have)."""
    table = dict(PRICES)
    zero = Price(input=0.0, output=0.0, cache_write=0.0, cache_read=0.0)
    for family, override in overrides.items():
        base = table.get(family, zero)
        table[family] = Price(
            input=base.input if override.input is None else override.input,
            output=base.output if override.output is None else override.output,
            cache_write=base.cache_write if override.cache_write is None else override.cache_write,
            cache_read=base.cache_read if override.cache_read is None else override.cache_read,
        )
    return table


def price_of(model: str, table: Mapping[str, Price]) -> Price | None:
    """The price of the longest family `model` starts with (claude-sonnet-4-5-20250929 is
    claude-sonnet-4); None if no family matches."""
    name = model.lower()
    families = [family for family in table if name.startswith(family)]
    return table[max(families, key=len)] if families else None


def cost_of(tokens: Tokens, price: Price) -> float:
    return (
        tokens.input * price.input
        + tokens.output * price.output
        + tokens.cache_write * price.cache_write
        + tokens.cache_read * price.cache_read
    ) / 1_000_000


class Sum(msgspec.Struct, kw_only=True):
    tokens: Tokens = Tokens()
    cost: float = 0.0
    # Models seen without a price: their tokens are counted, their cost is not.
    unpriced: list[str] = []


def add(total: Sum, record: UsageRecord, table: Mapping[str, Price]) -> Sum:
    price = price_of(record.model, table)
    unpriced = total.unpriced
    if price is None and record.model not in unpriced:
        unpriced = [*unpriced, record.model]
    return Sum(
        tokens=total.tokens + record.tokens,
        cost=total.cost + (cost_of(record.tokens, price) if price else 0.0),
        unpriced=unpriced,
    )


Grouping = Callable[[str, UsageRecord], str | None]


def summarize(
    records: Mapping[str, Iterable[UsageRecord]], group: Grouping, table: Mapping[str, Price]
) -> dict[str, Sum]:
    """Sums by `group(agent, record)`; a record it maps to None is left out."""
    sums: dict[str, Sum] = {}
    for agent, agent_records in records.items():
        for record in agent_records:
            name = group(agent, record)
            if name is not None:
                sums[name] = add(sums.get(name, Sum()), record, table)
    return sums


def by_agent(agent: str, _record: UsageRecord) -> str:
    return agent


def by_day(_agent: str, record: UsageRecord) -> str:
    """The UTC day (records carry UTC ISO times)."""
    return record.ts[:10] or "unknown"


# --- per task: who held which task when -------------------------------------------------


@dataclass(frozen=True)
class Span:
    """`agent` held `task` from `start` until `end` (None: still holds it); ISO UTC."""

    task: str
    agent: str
    start: str
    end: str | None


Snapshot = tuple[str, list[Task]]  # (ISO UTC time, the ledger's tasks then)


def _holder(task: Task) -> str | None:
    return task.assignee if task.assignee and task.status != "done" else None


def task_spans(history: Iterable[Snapshot]) -> list[Span]:
    """Spans from ledger snapshots in time order: a task is held by its assignee from the
    first snapshot that shows it assigned (and not done) until one that shows it done,
    reassigned or gone."""
    spans: list[Span] = []
    open_spans: dict[str, Span] = {}
    for when, tasks in history:
        holders = {t.id: _holder(t) for t in tasks}
        for task_id, span in list(open_spans.items()):
            if holders.get(task_id) != span.agent:
                spans.append(Span(span.task, span.agent, span.start, when))
                del open_spans[task_id]
        for task_id, agent in holders.items():
            if agent is not None and task_id not in open_spans:
                open_spans[task_id] = Span(task_id, agent, when, None)
    return spans + list(open_spans.values())


def by_task(spans: Iterable[Span]) -> Grouping:
    """A record goes to the task its agent held at the record's time; an agent holding
    several works on the one it took last. Work outside every task is left out."""
    per_agent: dict[str, list[Span]] = {}
    for span in spans:
        per_agent.setdefault(span.agent, []).append(span)
    for agent_spans in per_agent.values():
        agent_spans.sort(key=lambda s: s.start, reverse=True)

    def group(agent: str, record: UsageRecord) -> str | None:
        when = _normal(record.ts)
        for span in per_agent.get(agent, ()):
            start = _normal(span.start)
            if start <= when and (span.end is None or when < _normal(span.end)):
                return span.task
        return None

    return group


def _normal(ts: str) -> str:
    """ISO UTC times compared as text: `Z` and `+00:00` made the same, to microseconds."""
    base = ts.replace("+00:00", "").rstrip("Z")
    date, _, frac = base.partition(".")
    return f"{date}.{frac[:6]:0<6}"


class LedgerHistory:
    """tasks.json as each commit of the hive's branch holds it (commit times, oldest
    first, one snapshot per change), then as the file is now (its mtime). Each `read`
    walks only the commits made since the last one (a full walk of 5,000 commits takes
    0.3-0.8 s)."""

    def __init__(self, hive: Path, tasks_file: Path) -> None:
        self.hive = hive
        self.tasks_file = tasks_file
        self._committed: list[Snapshot] = []
        self._head: pygit2.Oid | None = None
        self._last_id: pygit2.Oid | None = None
        self._last_data: bytes | None = None

    def read(self) -> list[Snapshot]:
        self._walk()
        snapshots = list(self._committed)
        try:
            # An agent can put a FIFO there: never waited on.
            with os.fdopen(open_regular(self.tasks_file), "rb") as f:
                changed = _iso(os.fstat(f.fileno()).st_mtime)
                data = f.read()
        except (OSError, UnsafeFile):
            return snapshots
        if snapshots and data == self._last_data:
            # The file as last committed: it changed at its mtime, before the commit.
            committed, tasks = snapshots[-1]
            snapshots[-1] = (min(committed, changed, key=_normal), tasks)
        else:
            with contextlib.suppress(LedgerError):
                snapshots.append((changed, tasks_of(parse_ledger(data, str(self.tasks_file)))))
        return snapshots

    def _walk(self) -> None:
        # Here, not at the top: `hive roster` reads this module's sums and needs no git.
        import pygit2

        try:
            repo = pygit2.Repository(str(self.hive))
            head = None if repo.head_is_unborn else repo.head.target
        except (pygit2.GitError, KeyError):
            return
        if not isinstance(head, pygit2.Oid) or head == self._head:
            return
        walker = repo.walk(head, pygit2.enums.SortMode.TIME | pygit2.enums.SortMode.REVERSE)
        if self._head is not None:
            walker.hide(self._head)
        self._head = head
        name = self.tasks_file.relative_to(self.hive).as_posix()
        for commit in walker:
            try:
                blob = commit.tree[name]
            except KeyError:
                continue
            if not isinstance(blob, pygit2.Blob) or blob.id == self._last_id:
                continue
            self._last_id = blob.id
            try:
                tasks = tasks_of(parse_ledger(blob.data, name))
            except LedgerError:
                continue
            self._committed.append((_iso(commit.commit_time), tasks))
            self._last_data = blob.data


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat().replace("+00:00", "Z")


# --- the office's side: a pass every few seconds, on a thread ------------------------------

# How often the office reads the agents' usage records; a pass reads only what was
# appended to each file since the last one.
COST_PASS_S = 5.0


class UsageFile(msgspec.Struct, kw_only=True):
    """run/usage.json, written by the office: the sessions it saw each agent run (Claude
    transcripts are found by session id, and a fresh start forgets the old one) and the
    per-agent sums of its last pass (what `hive roster` shows)."""

    updated: str = ""
    sessions: dict[str, list[str]] = {}
    agents: dict[str, Sum] = {}


def read_usage_file(paths: HivePaths) -> UsageFile:
    try:
        return msgspec.json.decode(paths.usage_file.read_bytes(), type=UsageFile)
    except (OSError, msgspec.DecodeError):
        return UsageFile()


def agent_env(agent: AgentSpec, base: Mapping[str, str]) -> dict[str, str]:
    """The environment the agent's CLI finds its records by: the office's, then the roster's."""
    return {**base, **agent.env}


class CostWatch:
    """Reads every agent's usage through its provider and keeps the sums per agent and
    per task (for the app; the office's `run` also writes run/usage.json). `read_pass`
    runs on a worker thread; `agents` and `tasks` are replaced whole, so the loop reads
    either the old sums or the new ones."""

    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        providers: Mapping[str, Provider],
        env: Mapping[str, str],
    ) -> None:
        self.paths = paths
        self.config = config
        self.providers = providers
        self.env = dict(env)
        self.table = price_table(config.prices)
        self.book = UsageBook()
        self.remote = RemoteUsage()
        self.sessions = read_usage_file(paths).sessions
        self.spans: list[Span] = []
        self._history = LedgerHistory(paths.hive, paths.tasks)
        self.agents: dict[str, Sum] = {}
        self.tasks: dict[str, Sum] = {}
        # Called on the loop after a pass that changed a sum.
        self.listeners: list[Callable[[], None]] = []
        self._ledger_mark: tuple[int, int, int] | None = None

    def read_pass(self, current: Mapping[str, str | None]) -> bool:
        """Read what was appended (a remote desk's on its host, over ssh:
        hive_core/cost/remote_usage.py); True if any sum may have changed."""
        sessions = merged_sessions(self.sessions, current)
        changed = sessions != self.sessions
        self.sessions = sessions
        for spec in self.config.agents:
            if spec.host:
                continue  # its records are on its host: read below, never from this disk
            provider = self.providers.get(spec.provider)
            source = provider and provider.usage_source(
                spec, self.paths, agent_env(spec, self.env), sessions.get(spec.id, [])
            )
            if source:
                changed |= self.book.read(spec.id, source)
        asks = self.remote.asks(
            self.book, self.config.agents, self.paths, sessions, self.config.office.remote_venv
        )
        changed |= self.remote.read(self.book, asks, self.env)
        try:
            st = self.paths.tasks.stat()
            mark: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            mark = None
        if mark != self._ledger_mark:
            self._ledger_mark = mark
            self.spans = task_spans(self._history.read())
            changed = True
        if changed:
            records = self.book.all_records()
            self.agents = summarize(records, by_agent, self.table)
            self.tasks = summarize(records, by_task(self.spans), self.table)
        return changed

    def summary(self, by: Literal["agent", "task", "day"]) -> dict[str, Sum]:
        group = {"agent": by_agent, "day": by_day, "task": by_task(self.spans)}[by]
        return summarize(self.book.all_records(), group, self.table)

    def _office_pass(self, current: Mapping[str, str | None]) -> bool:
        changed = self.read_pass(current)
        if changed:
            usage = UsageFile(updated=utc_now_iso(), sessions=self.sessions, agents=self.agents)
            atomic_write(self.paths.usage_file, msgspec.json.encode(usage))
        return changed

    async def run(self, stop: asyncio.Event, current: Callable[[], dict[str, str | None]]) -> None:
        """The office's loop: a pass on a worker thread every COST_PASS_S, run/usage.json
        written after one that changed something, then the listeners told."""
        while not stop.is_set():
            if await asyncio.to_thread(self._office_pass, current()):
                for listener in list(self.listeners):
                    listener()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), COST_PASS_S)


def money(cost: float) -> str:
    return f"${cost:,.2f}"


def count(tokens: int) -> str:
    """12, 12.3k, 4.5M: token counts at a glance."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if tokens >= size:
            return f"{tokens / size:.1f}{unit}"
    return str(tokens)


def label(total: Sum) -> str:
    """An agent's or a task's cost in a few characters: the money if any of its tokens
    has a price, else the token count (a model without a price)."""
    if total.unpriced and not total.cost:
        return f"{count(total.tokens.total)} tok"
    return money(total.cost) + ("+?" if total.unpriced else "")
