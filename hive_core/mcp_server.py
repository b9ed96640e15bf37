"""`hive mcp`: the office's memory and mail as MCP tools over stdio, for one caller.

    build_server(desk) -> MCPServer        the tools, bound to desk.caller
    open_desk(paths) -> Desk               who is calling; CallerError if unproven

The agent CLI starts `hive mcp` as its own child, so the server inherits the agent's
HIVE_HOME, HIVE_AGENT_ID and HIVE_SECRET; the caller is settled once, at start, by
`caller.authenticated_caller` (proven with the secret while the office runs) and no
tool takes an identity argument, so a model cannot act as anyone else. Scopes are the
store's (`MemoryStore.search`), exactly as for `hive memory search`. The trust
boundary is the same as the CLI's: it keeps agents of one OS user from each other's
memory by mistake; it does not stop a hostile process of that user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from typing_extensions import TypedDict  # pydantic (under mcp) needs it on Python < 3.12

from hive_core import kick, mail
from hive_core.caller import authenticated_caller
from hive_core.config import load_office
from hive_core.memory import Hit, MemoryStoreError, note, open_store
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Act, Draft, Message, OfficeConfig

# The server's name: claude calls its tools mcp__hive__<tool>.
SERVER_NAME = "hive"
QUERY_LIMIT_MAX = 50

ScopeName = Literal["own", "office", "all"]


@dataclass(frozen=True)
class Desk:
    """The office and the caller every tool acts for."""

    paths: HivePaths
    config: OfficeConfig
    caller: str


def open_desk(paths: HivePaths) -> Desk:
    """The office at `paths` and its authenticated caller (CallerError, ConfigError)."""
    config = load_office(paths.office_toml)
    return Desk(paths, config, authenticated_caller(paths, config))


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
        ScopeOut(name="all", covers="own and office together"),
    ]


def draft_problem(desk: Desk, draft: Draft) -> str | None:
    """Why the draft cannot be sent, as `hive send` would say it; None if it can."""
    return (
        mail.check_recipient(desk.config, desk.caller, draft.to)
        or mail.check_draft(draft)
        or (
            None
            if draft.body.strip() or draft.subject
            else "the message is empty: give a body, or at least a subject."
        )
    )


# --- the server -----------------------------------------------------------------------


def build_server(desk: Desk) -> MCPServer:
    server: MCPServer = MCPServer(
        SERVER_NAME,
        # stderr is the agent CLI's log of this server: only what goes wrong belongs there.
        log_level="WARNING",
        instructions=(
            f"The hive-office tools of {desk.caller}: your memory (write, query), your "
            "inbox, and sending messages to the team. They always act as you."
        ),
    )

    @server.tool()
    def memory_write(text: str) -> Written:
        """Remember TEXT: a private note (scope own), searchable at once and folded into
        your memory.md later. One fact per note; point to files rather than pasting them."""
        try:
            entry = note(desk.paths, desk.caller, text)
        except (ValueError, MemoryStoreError) as e:
            raise ToolError(str(e)) from None
        return Written(id=entry.id, path=entry.path)

    @server.tool()
    def memory_query(query: str, scope: ScopeName = "all", limit: int = 10) -> list[HitOut]:
        """Search memory, best match first. scope: own (your private memory), office
        (board, tasks, triage, promoted knowledge, your mail) or all. Finds near-identical
        text: any case or punctuation, other word forms, pieces of identifiers."""
        if not 1 <= limit <= QUERY_LIMIT_MAX:
            raise ToolError(f"limit must be between 1 and {QUERY_LIMIT_MAX}.")
        try:
            # A store per call: the SDK runs sync tools on worker threads, and a SQLite
            # connection belongs to the thread that opened it.
            with open_store(desk.paths) as store:
                hits = store.search(query, desk.caller, scope, limit)
        except (ValueError, MemoryStoreError) as e:
            raise ToolError(str(e)) from None
        return [hit_out(h) for h in hits]

    @server.tool()
    def list_scopes() -> Scopes:
        """Who you are to the office and what each memory_query scope covers for you."""
        return Scopes(caller=desk.caller, scopes=scopes_for(desk.caller))

    @server.tool()
    def send(to: str, act: Act = "inform", subject: str = "", body: str = "") -> Queued:
        """Send a message from you: `to` is an agent id, or god (the manager), human,
        broadcast or triage. request, query and propose expect a reply; the other acts
        end a thread. The office delivers it from your outbox."""
        draft = Draft(to=to, act=act, subject=subject.strip(), body=body)
        problem = draft_problem(desk, draft)
        if problem:
            raise ToolError(problem)
        box = desk.paths.mailbox(desk.caller)
        path = mail.write_draft(box, draft)
        return Queued(
            path=str(path.relative_to(desk.paths.hive)),
            delivered_now=kick.kick(desk.paths, desk.caller),
        )

    @server.tool()
    def inbox() -> list[MessageOut]:
        """Your unread messages, oldest first, in full. Mark one processed with
        `hive done ID` when you have dealt with it."""
        return [message_out(m) for m in mail.iter_inbox(desk.paths.mailbox(desk.caller))]

    return server


def run(desk: Desk) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    build_server(desk).run("stdio")
