"""The office's semantic memory search: the model loaded once, used by every caller.

A control request with cmd "memory" (hive_core/memory/served.py sends it for `hive
memory search`, MCP's memory_query and the app) is answered here, as whoever whoami
says the caller is (control.ControlServer sets `agent`). The model is loaded lazily, by
the first semantic or hybrid search after the office starts, on a thread of its own:
torch's import and the weights take seconds, and the office's loop never waits for
them. Until it is loaded (and every entry without a vector has one) a search is
answered "loading" at once and its caller asks again; once it is, a search runs on
that thread with the store this office keeps open for it, embedding the few entries
written since the last search first. A request with no search says how the model
stands without loading it (doctor).

`loads` counts the times this office loaded the model: one per run, however many
searches follow, and each load is a line in the office's log.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from hive_core.caller import REQUEST_MAX
from hive_core.memory import embed
from hive_core.memory.served import Served, State, encode
from hive_core.memory.store import (
    EMBED_BATCH,
    CallerRefused,
    Filters,
    MemoryStore,
    Mode,
    SearchScope,
    open_store,
)
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, ControlReply, ControlRequest, MemoryQuery

# Entries a search embeds before it runs (one batch: a fraction of a second); more
# without a vector (a reindex, a burst of mail) are embedded in the background while
# searches are answered "loading".
CATCH_UP = EMBED_BATCH
# Entries embedded between looks at whether the office is stopping.
EMBED_STEP = 2 * EMBED_BATCH
# What a load says in the office's log (tests count it).
LOADED = "loaded the semantic model"


class SemanticMemory:
    def __init__(
        self,
        paths: HivePaths,
        roster: Callable[[], Iterable[str]],
        log: Callable[[str], None],
    ) -> None:
        """`roster`: the agent ids a search may run as (read on the loop); `log`: the
        office's log."""
        self.paths = paths
        self._roster = roster
        self._log = log
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="semantic")
        # Loaded on that thread; the store is opened by the first search of any kind.
        self._model: embed.Embedder | None = None
        self._store: MemoryStore | None = None
        self._opening = threading.Lock()  # keyword searches run on other threads
        self._preparing: asyncio.Future[None] | None = None
        self._why = ""  # why the model cannot be loaded, once that is known
        self._closed = False
        self.loads = 0

    @property
    def state(self) -> State:
        if self._why:
            return "unavailable"
        if self._preparing is not None and not self._preparing.done():
            return "loading"
        return "idle" if self._model is None else "ready"

    async def answer(self, req: ControlRequest) -> ControlReply:
        """The answer to a memory request whose `agent` is the searcher."""
        query = req.memory
        callers = frozenset({HUMAN, *self._roster()})
        who = req.agent or HUMAN
        loop = asyncio.get_running_loop()
        if query is not None and query.mode == "keyword":
            # No model: not behind one being loaded either.
            return await self._run(loop.run_in_executor(None, self._search, who, query, callers))
        if query is None or self.state == "unavailable":
            return reply(self._served(self.state))
        if self.state != "ready":
            self._prepare()
            return reply(self._served("loading"))
        return await self._run(
            loop.run_in_executor(self._thread, self._search, who, query, callers)
        )

    async def _run(self, searching: asyncio.Future[Served]) -> ControlReply:
        try:
            served = await searching
        except Exception as exc:
            return ControlReply(ok=False, error=f"the memory search failed: {exc!r}.")
        if served.state == "loading":
            self._prepare()
        return reply(served)

    def close(self) -> None:
        """Stop embedding at the next step, close the store on its thread, and let the
        thread go (a load under way finishes first: it cannot be interrupted)."""
        self._closed = True
        self._thread.submit(self._close_store)
        self._thread.shutdown(wait=False)

    def _served(self, state: State) -> Served:
        return Served(state=state, loads=self.loads, why=self._why)

    # --- on the loop ---

    def _prepare(self) -> None:
        """Load the model and embed what has no vector, on the thread, unless under way."""
        if self._closed or (self._preparing is not None and not self._preparing.done()):
            return
        loop = asyncio.get_running_loop()
        self._preparing = loop.run_in_executor(self._thread, self._load_and_embed)

    # --- on the thread ---

    def _load_and_embed(self) -> None:
        try:
            if self._model is None:
                started = time.monotonic()
                model = embed.load()
                self.loads += 1
                self._model = model
                self._log(
                    f"{LOADED} in {time.monotonic() - started:.1f} s "
                    f"(load {self.loads} of this run)"
                )
            store = self._open()
            store.adopt(self._model)
            started = time.monotonic()
            pending = left = store.embed_pending(at_most=0)
            while left and not self._closed:
                left = store.embed_pending(at_most=EMBED_STEP)
            if pending:
                self._log(
                    f"embedded {pending - left} memory entries for semantic search in "
                    f"{time.monotonic() - started:.1f} s"
                )
        except embed.SemanticUnavailable as exc:
            self._why = str(exc)
            self._log(f"semantic memory search is unavailable: {exc}")
        except Exception as exc:
            self._why = (
                f"the office could not load the semantic model ({exc!r}); "
                "`hive-office doctor` checks the extra"
            )
            self._log(self._why)

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _open(self) -> MemoryStore:
        """The store searches use, searching with the model once it is loaded (reopened
        when another process rebuilt memory.db)."""
        with self._opening:
            if self._store is not None and self._store.replaced():
                self._store.close()
                self._store = None
            if self._store is None:
                self._store = open_store(self.paths)
                if self._model is not None:
                    self._store.adopt(self._model)
                for line in self._store.recovered:
                    self._log(f"memory: {line}")
                self._store.recovered = []
            return self._store

    def _search(self, who: str, query: MemoryQuery, callers: frozenset[str]) -> Served:
        store = self._open()
        store.callers = callers
        if query.mode != "keyword" and store.embed_pending(at_most=CATCH_UP):
            return self._served("loading")
        filters = Filters(tags=query.tags, source=query.source, external_id=query.external_id)
        try:
            hits = store.search(
                query.query,
                who,
                cast(SearchScope, query.scope),
                query.limit,
                cast(Mode, query.mode),
                filters,
            )
        except (ValueError, CallerRefused) as exc:
            return Served(state="ready", loads=self.loads, bad=str(exc))
        return Served(state="ready", loads=self.loads, hits=hits)


def reply(served: Served) -> ControlReply:
    """`served` as a control reply that fits the line a caller reads (REQUEST_MAX):
    hits past it are left out from the end, and counted."""
    answer = ControlReply(ok=True, detail=encode(served).decode())
    hits = served.hits or []
    size = len(encode(answer))
    while size > REQUEST_MAX - 1 and hits:
        keep = min(len(hits) - 1, int(len(hits) * (REQUEST_MAX - 1) / size))
        left_out = served.left_out + len(hits) - keep
        hits = hits[:keep]
        trimmed = Served(
            state=served.state, loads=served.loads, why=served.why, hits=hits, left_out=left_out
        )
        answer = ControlReply(ok=True, detail=encode(trimmed).decode())
        size = len(encode(answer))
    return answer
