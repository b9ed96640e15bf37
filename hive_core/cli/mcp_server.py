"""`hive mcp`: the office's memory and mail as MCP tools over stdio, for one caller.

    build_server(caller) -> MCPServer      the tools, each call attributed again
    open_caller(paths) -> Caller           who is calling (caller.identify); CallerError

The agent CLI starts `hive mcp` as its own child, so the server is a process of the
agent's session with its environment. Who it serves is settled at start by the same
rule as every `hive` verb (caller.identify), and every tool call asks the office again:
a server that outlives its agent's start, or an office restarted meanwhile, is refused
instead of acting on an old answer. Writing memory needs the proof `hive memory note`
needs (caller.proven). No tool takes an identity argument, so a model cannot act
as anyone else. Scopes are the store's (`MemoryStore.search`), exactly as for `hive
memory search`.

What a tool changes (a note, a forget, an edit, a message) is the `hive` verb itself,
`--json`, run by this server as a child of its own (`_hive`): in the office while one
runs (the thin `hive`), else the full `hive` in that child, as any `hive` call. So a
tool and the command line cannot differ, and the office attributes the change to the
agent from the child's process, as for every verb.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from typing_extensions import TypedDict  # pydantic (under mcp) needs it on Python < 3.12

from hive_core import mail
from hive_core.caller import Caller, CallerError, identify, proven
from hive_core.config import load_office
from hive_core.marks import caution
from hive_core.memory import (
    Filters,
    Hit,
    MemoryStoreError,
    SemanticUnavailable,
    search,
)
from hive_core.memory.entry import Source
from hive_core.paths import HivePaths
from hive_core.remote.relay import hive_command
from hive_core.schema import HUMAN, Act, Message

# The server's name: claude calls its tools mcp__hive__<tool>.
SERVER_NAME = "hive"
QUERY_LIMIT_MAX = 50
# How long a tool waits for its verb (the office answers within client.ANSWER_TIMEOUT_S;
# with no office the full `hive` starts and writes).
VERB_TIMEOUT_S = 60.0

ScopeName = Literal["own", "office", "all"]
ModeName = Literal["keyword", "semantic", "hybrid"]


def open_caller(paths: HivePaths) -> Caller:
    """The office at `paths` and its caller (CallerError, ConfigError)."""
    return identify(paths, load_office(paths.office_toml))


def _quiet(_line: str) -> None:
    pass


def _still(caller: Caller, *, proof: bool = False) -> Caller:
    """The caller of this call: the office asked again, and it must be the one the
    server started for."""
    try:
        now = identify(caller.paths, caller.config)
        if proof:
            proven(now)
    except CallerError as e:
        raise ToolError(str(e)) from None
    if now.who != caller.who:
        raise ToolError(
            f"this server acts for {caller.who}, and the office says you are {now.who}."
        )
    return now


def _hive(now: Caller, argv: list[str], stdin: str = "") -> dict[str, Any]:
    """`hive ARGV` (its words include --json) as this server's agent: its JSON answer,
    or its refusal as the tool's error."""
    try:
        done = subprocess.run(
            [*hive_command(), "--home", str(now.paths.home), *argv],
            input=stdin.encode(),
            capture_output=True,
            timeout=VERB_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"`hive {argv[0]}` did not end within {VERB_TIMEOUT_S:.0f} s.") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().removeprefix("hive: ")
        raise ToolError(said or f"`hive {argv[0]}` failed (exit {done.returncode}).")
    answer = json.loads(done.stdout)
    assert isinstance(answer, dict), answer
    return answer


# --- what the tools return (TypedDicts: the SDK turns them into output schemas) --------


class HitOut(TypedDict):
    id: str
    score: float
    source: str
    scope: str
    owner: str
    path: str
    text: str
    updated_at: str
    tags: list[str]
    external_id: str


class ScopeOut(TypedDict):
    name: str
    covers: str


class Scopes(TypedDict):
    caller: str
    scopes: list[ScopeOut]


class Written(TypedDict):
    id: str
    path: str


class Queued(TypedDict):
    path: str
    delivered_now: bool


class MessageOut(TypedDict):
    id: str
    sender: str
    to: str
    act: str
    subject: str
    body: str
    created_at: str
    in_reply_to: str | None
    task: str | None
    needs_human: bool
    # Set for mail to read as material, not instructions (web origin, flagged text).
    caution: str | None


def hit_out(hit: Hit) -> HitOut:
    e = hit.entry
    return HitOut(
        id=hit.id,
        score=hit.score,
        source=e.source,
        scope=e.scope,
        owner=e.owner,
        path=e.path,
        text=e.text,
        updated_at=e.updated_at,
        tags=list(e.tags),
        external_id=e.external_id,
    )


def message_out(m: Message) -> MessageOut:
    return MessageOut(
        id=m.id,
        sender=m.sender,
        to=m.to,
        act=m.act,
        subject=m.subject,
        body=m.body,
        created_at=m.created_at,
        in_reply_to=m.in_reply_to,
        task=m.task,
        needs_human=m.needs_human,
        caution=caution(m.origin, m.injection),
    )


def scopes_for(caller: str) -> list[ScopeOut]:
    own = (
        f"your private memory: agents/{caller}/memory.md, memory/notes.md and "
        "memory/archive.md; nobody else can read it"
        if caller != HUMAN
        else "nothing: the person keeps no private memory"
    )
    return [
        ScopeOut(name="own", covers=own),
        ScopeOut(
            name="office",
            covers="the board, tasks, triage, promoted knowledge, and messages you sent or received",
        ),
        ScopeOut(
            name="all",
            covers="own and office together"
            if caller != HUMAN
            else "everything: the office and every agent's private memory (owner on each hit)",
        ),
    ]


# --- the server -----------------------------------------------------------------------


def build_server(caller: Caller) -> MCPServer:
    server: MCPServer = MCPServer(
        SERVER_NAME,
        # stderr is the agent CLI's log of this server: only what goes wrong belongs there.
        log_level="WARNING",
        instructions=(
            f"The hive-office tools of {caller.who}: your memory (write, query), your "
            "inbox, and sending messages to the team. They always act as you."
        ),
    )

    @server.tool()
    def memory_write(text: str) -> Written:
        """Remember TEXT: a private note (scope own), searchable at once and folded into
        your memory.md later. One fact per note; point to files rather than pasting them."""
        now = _still(caller, proof=True)
        entry = _hive(now, ["memory", "note", "--json", "-"], text)
        return Written(id=entry["id"], path=entry["path"])

    @server.tool()
    def memory_query(
        query: str = "",
        scope: ScopeName = "all",
        limit: int = 10,
        mode: ModeName = "keyword",
        tags: list[str] | None = None,
        source: Source | None = None,
        external_id: str | None = None,
    ) -> list[HitOut]:
        """Search memory, best match first. scope: own (your private memory), office
        (board, tasks, triage, promoted knowledge, your mail) or all. Keyword mode finds
        near-identical text: any case or punctuation, other word forms, pieces of
        identifiers; semantic and hybrid (when installed) also find other wordings.
        tags, source and external_id are exact filters (every tag must be present); with
        no query they list the entries they match, newest first."""
        if not 1 <= limit <= QUERY_LIMIT_MAX:
            raise ToolError(f"limit must be between 1 and {QUERY_LIMIT_MAX}.")
        filters = Filters(tags=tuple(tags or ()), source=source, external_id=external_id)
        if not query.strip() and filters.empty:
            raise ToolError("give a query, or filter with tags, source or external_id.")
        now = _still(caller)
        try:
            # Semantic and hybrid by the office's model, loaded once (memory/served.py);
            # a store per call otherwise (the SDK runs sync tools on worker threads). The
            # lines it would tell a person (it waits for the model) are no failure, and
            # this server's stderr is only for failures.
            hits = search(now.paths, query, now.who, scope, limit, mode, filters, tell=_quiet)
        except (ValueError, MemoryStoreError, SemanticUnavailable, CallerError) as e:
            raise ToolError(str(e)) from None
        return [hit_out(h) for h in hits]

    @server.tool()
    def memory_forget(entry_id: str) -> Written:
        """Forget a memory entry (an id from memory_query): it is taken out of the file it
        came from. Your own private memory only; office knowledge is the manager's."""
        now = _still(caller, proof=True)
        entry = _hive(now, ["memory", "forget", "--json", "--", entry_id])
        return Written(id=entry["id"], path=entry["path"])

    @server.tool()
    def memory_edit(entry_id: str, text: str) -> Written:
        """Replace the text of a memory entry (an id from memory_query) where it was
        written; returns its new id (an id follows its text). Who may: as memory_forget."""
        now = _still(caller, proof=True)
        entry = _hive(now, ["memory", "edit", "--json", "--text", "-", "--", entry_id], text)
        return Written(id=entry["id"], path=entry["path"])

    @server.tool()
    def list_scopes() -> Scopes:
        """Who you are to the office and what each memory_query scope covers for you."""
        now = _still(caller)
        return Scopes(caller=now.who, scopes=scopes_for(now.who))

    @server.tool()
    def send(to: str, act: Act = "inform", subject: str = "", body: str = "") -> Queued:
        """Send a message from you: `to` is an agent id, or god (the manager), human,
        broadcast or triage. request, query and propose expect a reply; the other acts
        end a thread. The office delivers it from your outbox."""
        now = _still(caller)
        argv = ["send", "--json", "--to", to, "--act", act, "--subject", subject.strip()]
        queued = _hive(now, [*argv, "--body", "-"], body)
        return Queued(path=queued["path"], delivered_now=queued["delivered_now"])

    @server.tool()
    def inbox() -> list[MessageOut]:
        """Your unread messages, oldest first, in full. Mark one processed with
        `hive done ID` when you have dealt with it."""
        return [message_out(m) for m in mail.iter_inbox(_still(caller).box)]

    return server


def run(caller: Caller) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    build_server(caller).run("stdio")
