"""Semantic and hybrid search served by the office, which loads the model once.

Loading torch and all-MiniLM-L6-v2 takes seconds; a `hive memory search --semantic`
that loaded them itself paid that on every call. While an office runs, semantic and
hybrid searches from the command line, MCP and the app are a control request (cmd
"memory") that the office answers with the model it keeps loaded
(hive_core/office/semantic.py), as whoever its whoami says the caller is. The first one
after the office starts finds the model not loaded: the office starts loading it on a
thread of its own and answers "loading" at once, and the caller asks again every
POLL_S, saying once that it waits, up to LOAD_WAIT_S. An answer carries the hits
themselves (the caller may not be able to read memory.db: a contained desk cannot).

With no office running, the caller loads the model itself and says so once: memory is
a cache of the hive that every verb may read without the office, keyword search does,
and an answer in seconds is worth more than a refusal that says to start the office.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import msgspec

from hive_core import invocation
from hive_core.caller import REQUEST_MAX, CallerError, office_running, request
from hive_core.memory import embed
from hive_core.memory.embed import SemanticUnavailable
from hive_core.memory.store import (
    Filters,
    Hit,
    MemoryStore,
    Mode,
    SearchScope,
    open_store,
)
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, ControlReply, ControlRequest, MemoryQuery

State = Literal["idle", "loading", "ready", "unavailable"]
# How often a caller asks again while the office loads the model.
POLL_S = 0.2
# How long a caller waits for the office to load the model (and embed what has no
# vector yet: thousands of entries on a first start take a while on a CPU).
LOAD_WAIT_S = 600.0
# How long one answer may take once the model is loaded (a search, and embedding the
# few entries written since the last one).
ANSWER_TIMEOUT_S = 30.0
# What the one line on stderr says, per reason.
WAITING = "the office is loading the semantic model (once per start); waiting for it"
LOCAL = (
    "no office is running, so this search loads the semantic model itself (seconds); "
    "with the office running it stays loaded there"
)
# The largest reply line a caller reads (caller.request).
REPLY_MAX = REQUEST_MAX


class Served(msgspec.Struct, kw_only=True):
    """The office's answer (a ControlReply's detail, as JSON): how its model stands, how
    many times this office has loaded it, and a search's hits (None: not searched, as
    while it loads or when only asked how it stands). `left_out`: hits past the reply's
    size bound, dropped from the end. `bad`: why the search cannot run as given (an
    unknown scope, a tag with a space: MemoryStore.search's ValueError or CallerRefused)."""

    state: State
    loads: int = 0
    why: str = ""
    hits: list[Hit] | None = None
    left_out: int = 0
    bad: str = ""


encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Served).decode


def decode(reply: ControlReply) -> Served:
    """The office's answer in `reply`; CallerError if it refused or said nothing usable."""
    if not reply.ok:
        raise CallerError(reply.error or "the office refused the memory search.")
    try:
        return _decode(reply.detail or "")
    except msgspec.DecodeError:
        raise CallerError("the office's answer to a memory search was unreadable.") from None


def _ask(paths: HivePaths, req: ControlRequest, timeout: float) -> ControlReply | None:
    """The office's answer, None if no office runs (CallerError if one runs and does
    not answer)."""
    try:
        return request(paths.control_socket, req, timeout=timeout)
    except ConnectionError:
        if office_running(paths) is False:
            return None
        raise CallerError("the office is not answering; try again.") from None
    except (OSError, msgspec.DecodeError):
        raise CallerError("the office is not answering; try again.") from None


def _claim(who: str) -> ControlRequest:
    """A memory request carrying the caller's claim as whoami takes it."""
    return ControlRequest(
        cmd="memory",
        agent=None if who == HUMAN else who,
        secret=invocation.getenv("HIVE_SECRET") or None,
    )


def status(paths: HivePaths, who: str = HUMAN) -> Served | None:
    """How the running office's model stands, without loading it; None with no office."""
    reply = _ask(paths, _claim(who), ANSWER_TIMEOUT_S)
    return None if reply is None else decode(reply)


def from_office(
    paths: HivePaths,
    who: str,
    query: MemoryQuery,
    tell: Callable[[str], None],
) -> list[Hit] | None:
    """The running office's hits for `query` as `who` (claimed; the office decides), or
    None when no office runs. SemanticUnavailable when the office cannot load the
    model, ValueError when the search cannot run as given, CallerError when the office
    refuses the caller (each message says why)."""
    req = msgspec.structs.replace(_claim(who), memory=query)
    waited_since: float | None = None
    while True:
        reply = _ask(paths, req, ANSWER_TIMEOUT_S)
        if reply is None:
            return None
        served = decode(reply)
        if served.bad:
            raise ValueError(served.bad)
        if served.state == "unavailable":
            raise SemanticUnavailable(served.why)
        if served.hits is not None:
            if served.left_out:
                tell(
                    f"{served.left_out} more hits were left out (the answer's size limit); "
                    "ask for fewer (--limit) or narrow the search"
                )
            return served.hits
        now = time.monotonic()
        if waited_since is None:
            waited_since = now
            tell(WAITING)
        elif now - waited_since > LOAD_WAIT_S:
            raise CallerError(
                f"the office has been loading the semantic model for {LOAD_WAIT_S:.0f} s; "
                "see `hive-office doctor`, or search with --mode keyword."
            )
        time.sleep(POLL_S)


def search(
    paths: HivePaths,
    query: str,
    who: str,
    scope: SearchScope = "all",
    limit: int = 10,
    mode: Mode = "keyword",
    filters: Filters | None = None,
    *,
    tell: Callable[[str], None],
    store: MemoryStore | None = None,
) -> list[Hit]:
    """`MemoryStore.search` as `who`, the model's work done where it is kept: keyword
    here (in `store`, or one opened for the call), semantic and hybrid by the running
    office, or here when none runs (`tell` hears that once, and any wait for the
    office). Raises what MemoryStore.search raises (ValueError for what the office
    finds wrong with the search), and CallerError when the office refuses the caller."""
    filters = filters or Filters()
    if mode != "keyword":
        # Not installed here is not installed in the office either (one installation):
        # said without a round trip, or a model loaded for nothing.
        embed.check()
        asked = MemoryQuery(
            query=query,
            scope=scope,
            mode=mode,
            limit=limit,
            tags=filters.tags,
            source=filters.source,
            external_id=filters.external_id,
        )
        hits = from_office(paths, who, asked, tell)
        if hits is not None:
            return hits
        tell(LOCAL)
    if store is not None:
        return store.search(query, who, scope, limit, mode, filters)
    with open_store(paths) as opened:
        return opened.search(query, who, scope, limit, mode, filters)
