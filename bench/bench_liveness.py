"""Liveness of the three-agent demo office (issue 5, "Measure"). Prints; asserts nothing.

    .venv/bin/python bench/bench_liveness.py [--runs 3] [--timeout 120] [--keep] [--quick]
                                             [--gemini] [--codex]

The summary is also printed as a FIGURE line (bench/figures.py) for bench/run_all.

Each run lays out the demo office (michael the manager, jim and pam: real claude CLIs,
each against its own scripted Messages API in this process), runs a headless Office
until the scenario is finished (both tasks done, every agent's inbox empty, the board
showing "- [x] t2") or the timeout, then reads what happened from the files and objects:

  mail      messages sent (log.jsonl "route" lines) and office-generated ones ("office"
            lines, e.g. the standup); copies delivered (one per recipient) against copies
            in that recipient's inbox/.done/. Target: every copy consumed.
  wake      office.watchdog.stats: nudges per batch (max, mean), batches that needed a
            retry, unconfirmed batches, refused duplicates (target: <= 1 nudge per batch,
            0 duplicates); beside them, batches handed over by the Stop-hook drain
            instead (log.jsonl "agent" lines whose detail says "kept working").
  context   coordination text the office injected into the agents' context, taken from
            the scripted models' recorded main requests: Stop hook feedback, hook
            additional context (SessionStart / UserPromptSubmit / PostToolUse) and the
            nudge prompts. Counted once, in the request where it first appears (the CLI
            repeats the conversation in every later request). The CLI's own labels
            ("Stop hook feedback:", "X hook additional context: ") are not counted: the
            bytes are the office's text. Digests (Stop feedback, UserPromptSubmit and
            PostToolUse) are divided by the message ids they list (`- <id> from ...`).
            Target: <= 600 bytes per message digest entry. SessionStart context (identity,
            team, memory, waiting mail) is per session and reported on its own.
  time      from starting the office to the scenario finished.

--gemini: jim's desk is the pinned Gemini CLI (scripts/gemini-version) against the
scripted Gemini API (hive_core/demo/scripted_model/gemini.py) playing the same brain, so
the figures are those of a mixed office. Each desk's own are printed beside them, with
its vendor (a turn: a request that starts from a prompt, not from a tool's result). Gemini puts the
office's hook context in `<hook_context>` around the prompt or the tool's result, and
sends an AfterAgent refusal's reason as the next prompt, unlabelled (gemini_injected).

The CLI 2.1.197 sends hook additional context as "system" messages in the request's
messages, not in the last user message, so every message of every role is scanned here
(`last_user_texts` alone would miss them); nudge prompts and Stop feedback are user
texts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from figures import figure

from hive_core.cli import hive
from hive_core.demo.office import AGENTS, apply_env, claim_demo_home, start_demo
from hive_core.events.policy import digest
from hive_core.office import Office, office_lock
from hive_core.paths import HivePaths

TARGET_NUDGES_PER_BATCH = 1
TARGET_DUPLICATES = 0
TARGET_DIGEST_BYTES_PER_ENTRY = 600
AGENT_IDS = [agent for agent, _name, _role in AGENTS]

STOP_LABEL = "Stop hook feedback:"
HOOK_LABEL = re.compile(r"(SessionStart|UserPromptSubmit|PostToolUse) hook additional context: ")
# Where the office's text ends inside whatever the CLI put around it: a digest's last
# line (taken from the digest itself), or SessionStart's empty-inbox line.
DIGEST_END = digest([]).splitlines()[-1]
INBOX_EMPTY = "Your inbox is empty."
DIGEST_ENTRY = re.compile(r"^- \S+ from ", re.MULTILINE)


# --- running the scenario ---------------------------------------------------------------


def scenario_finished(paths: HivePaths) -> bool:
    try:
        tasks = json.loads(paths.tasks.read_text()).get("tasks", [])
        board = paths.board.read_text()
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    if not tasks or any(t.get("status") != "done" for t in tasks):
        return False
    for agent in AGENT_IDS:
        inbox = paths.mailbox(agent).inbox
        if inbox.exists() and any(not p.name.startswith(".") for p in inbox.glob("*.json")):
            return False
    return "- [x] t2" in board


@dataclass
class Run:
    home: Path
    finished: bool
    seconds: float
    stats: Any  # WakeStats
    requests: dict[str, list[Any]]  # agent -> its main requests' bodies, oldest first


async def _drive(office: Office, paths: HivePaths, timeout: float) -> tuple[bool, float]:
    stop = asyncio.Event()
    started = time.monotonic()
    task = asyncio.create_task(office.run(stop))
    finished = False
    while time.monotonic() - started < timeout and not task.done():
        if scenario_finished(paths):
            finished = True
            break
        await asyncio.sleep(0.1)
    seconds = time.monotonic() - started
    stop.set()
    await task
    return finished, seconds


GEMINI_API_KEY = "AIza-bench-not-a-real-key-0123456789"


def gemini_desk(demo: Any, agent: str) -> Any:
    """Make `agent` of the laid-out demo a gemini desk: its brain now answers through
    the scripted Gemini API, and its roster entry names the gemini provider with a key
    and that API's address in its `env`."""
    from hive_core.demo.scripted_model.gemini import ScriptedGemini

    demo.models[agent].stop()
    model = ScriptedGemini(demo.brains[agent])
    model.start()
    demo.models[agent] = model
    toml = demo.paths.office_toml
    blocks = toml.read_text().split("\n[[agents]]\n")
    for n, block in enumerate(blocks):
        if f'id = "{agent}"\n' in block:
            block = block.replace('provider = "claude"\n', 'provider = "gemini"\n')
            blocks[n] = re.sub(
                r"env = \{[^\n]*\}\n",
                f'env = {{ GEMINI_API_KEY = "{GEMINI_API_KEY}", '
                f'GOOGLE_GEMINI_BASE_URL = "{model.base_url}" }}\n',
                block,
            )
    toml.write_text("\n[[agents]]\n".join(blocks))
    return model


CODEX_API_KEY = "sk-bench-not-a-real-key-0123456789"


def codex_desk(demo: Any, agent: str) -> Any:
    """Make `agent` of the laid-out demo a codex desk: its brain now answers through
    the scripted Responses API, and its roster entry names the codex provider with a
    key in its `env`, the model family the stand-in scripts, and the stand-in as a
    model provider on its `command` (as tests/codex_office.py does)."""
    from hive_core.demo.scripted_model.responses import MODEL, ScriptedResponses

    demo.models[agent].stop()
    model = ScriptedResponses(demo.brains[agent])
    model.start()
    demo.models[agent] = model
    settings = [
        'model_provider="standin"',
        'model_providers.standin.name="stand-in"',
        f'model_providers.standin.base_url="{model.base_url}/v1"',
        "model_providers.standin.requires_openai_auth=true",
        "model_providers.standin.supports_websockets=false",
        'sandbox_mode="danger-full-access"',  # bubblewrap cannot start in a container
    ]
    command = ", ".join(json.dumps(a) for c in settings for a in ("-c", c))
    toml = demo.paths.office_toml
    blocks = toml.read_text().split("\n[[agents]]\n")
    for n, block in enumerate(blocks):
        if f'id = "{agent}"\n' in block:
            block = block.replace(
                'provider = "claude"\n',
                f'provider = "codex"\nmodel = "{MODEL}"\ncommand = ["codex", {command}]\n',
            )
            blocks[n] = re.sub(
                r"env = \{[^\n]*\}\n", f'env = {{ OPENAI_API_KEY = "{CODEX_API_KEY}" }}\n', block
            )
    toml.write_text("\n[[agents]]\n".join(blocks))
    return model


def run_once(timeout: float, gemini: tuple[str, ...] = (), codex: tuple[str, ...] = ()) -> Run:
    home = Path(tempfile.mkdtemp(prefix="hl-", dir="/tmp"))
    paths = HivePaths(home)
    claim_demo_home(home)  # before the lock, which writes into the home (as --demo does)
    with office_lock(paths):
        demo = start_demo(home)
        try:
            for agent in gemini:
                gemini_desk(demo, agent)
            for agent in codex:
                codex_desk(demo, agent)
            apply_env(demo)
            office = Office(demo.paths, program=hive)
            finished, seconds = asyncio.run(_drive(office, demo.paths, timeout))
        finally:
            demo.stop()
    requests = {a: [r.body for r in m.main_requests] for a, m in demo.models.items()}
    return Run(home, finished, seconds, office.watchdog.stats, requests)


# --- mail ------------------------------------------------------------------------------


@dataclass
class Mail:
    sent: int  # "route" lines
    office_sent: int  # "office" lines (standups and the like)
    copies: int  # delivered: one per recipient of either
    consumed: int  # of those, in the recipient's inbox/.done/
    left_unread: list[str]  # "recipient:id" not in .done
    drains: int  # Stop-hook drains ("kept working")
    drains_by_agent: Counter[str]


def read_log(paths: HivePaths) -> list[dict[str, Any]]:
    lines = paths.log.read_text().splitlines() if paths.log.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def mail_figures(paths: HivePaths) -> Mail:
    log = read_log(paths)
    copies: list[tuple[str, str]] = []
    sent = office_sent = 0
    drains: Counter[str] = Counter()
    for entry in log:
        kind = entry.get("kind")
        if kind in ("route", "office") and entry.get("msg"):
            if kind == "route":
                sent += 1
            else:
                office_sent += 1
            copies += [(r, entry["msg"]) for r in entry.get("recipients") or []]
        elif kind == "agent" and "kept working" in str(entry.get("detail", "")):
            drains[str(entry.get("agent"))] += 1
    left = [f"{r}:{m}" for r, m in copies if not (paths.mailbox(r).done / f"{m}.json").exists()]
    return Mail(
        sent=sent,
        office_sent=office_sent,
        copies=len(copies),
        consumed=len(copies) - len(left),
        left_unread=left,
        drains=sum(drains.values()),
        drains_by_agent=drains,
    )


# --- wake ------------------------------------------------------------------------------


@dataclass
class Wake:
    batches: int
    nudges: int
    max_per_batch: int
    mean_per_batch: float
    retried: int  # batches nudged more than once
    unconfirmed: int  # batches whose UserPromptSubmit never came
    duplicates: int
    told_manager: int
    by_agent: dict[str, int]


def wake_figures(stats: Any) -> Wake:
    counts = list(stats.sends.values())
    return Wake(
        batches=len(counts),
        nudges=sum(counts),
        max_per_batch=max(counts, default=0),
        mean_per_batch=statistics.fmean(counts) if counts else 0.0,
        retried=sum(1 for n in counts if n > 1),
        unconfirmed=sum(1 for key in stats.sends if key not in stats.confirmed),
        duplicates=stats.duplicates,
        told_manager=sum(stats.told_manager.values()),
        by_agent={a: stats.nudges(a) for a in AGENT_IDS},
    )


# --- injected context --------------------------------------------------------------------


def message_texts(message: dict[str, Any]) -> Iterator[tuple[bool, str]]:
    """(is a plain user text, text) for every text of one message, any role."""
    role = message.get("role")
    content = message.get("content")
    if isinstance(content, str):
        yield role == "user", content
        return
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            yield role == "user", str(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            for _plain, text in message_texts({"role": "tool", "content": inner}):
                yield False, text


def _end_of(text: str, start: int) -> int:
    """Where the office's text that starts at `start` ends."""
    ends = []
    for terminator in (DIGEST_END, INBOX_EMPTY):
        at = text.find(terminator, start)
        if at >= 0:
            ends.append(at + len(terminator))
    nxt = HOOK_LABEL.search(text, start)
    if nxt:
        ends.append(nxt.start())
    if not ends:
        blank = text.find("\n\n", start)
        ends.append(blank if blank >= 0 else len(text))
    return min(ends)


def injected_segments(text: str, plain_user: bool) -> Iterator[tuple[str, str]]:
    """(kind, office text) for every piece of coordination text inside one text."""
    if plain_user and text.startswith("You have ") and "Run hive inbox" in text:
        yield "nudge", text
        return
    if plain_user and text.startswith(STOP_LABEL):
        start = len(STOP_LABEL)
        yield "Stop", text[start : _end_of(text, start)].strip()
    for match in HOOK_LABEL.finditer(text):
        yield match.group(1), text[match.end() : _end_of(text, match.end())].strip()


@dataclass
class Context:
    # kind -> office texts injected (each once per time it entered the context)
    texts: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, text: str) -> None:
        self.texts.setdefault(kind, []).append(text)

    def total(self, *kinds: str) -> int:
        return sum(len(t.encode()) for k in kinds for t in self.texts.get(k, []))

    def count(self, *kinds: str) -> int:
        return sum(len(self.texts.get(k, [])) for k in kinds)

    def entries(self, *kinds: str) -> int:
        return sum(len(DIGEST_ENTRY.findall(t)) for k in kinds for t in self.texts.get(k, []))

    def per_digest(self, *kinds: str) -> list[float]:
        """Bytes per listed message, digest by digest."""
        out = []
        for kind in kinds:
            for text in self.texts.get(kind, []):
                n = len(DIGEST_ENTRY.findall(text))
                if n:
                    out.append(len(text.encode()) / n)
        return out

    def longest_entry_line(self, *kinds: str) -> int:
        return max(
            (
                len(line.encode())
                for k in kinds
                for t in self.texts.get(k, [])
                for line in t.splitlines()
                if DIGEST_ENTRY.match(line)
            ),
            default=0,
        )


DIGEST_KINDS = ("Stop", "UserPromptSubmit", "PostToolUse")


HOOK_CONTEXT = re.compile(r"<hook_context>(.*?)</hook_context>\s*", re.S)


def gemini_injected(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, office text) for every piece of coordination text in one Gemini request.
    Gemini 0.61 wraps hook context in `<hook_context>` and merges adjacent user
    contents: SessionStart's is a part of its own ahead of the prompt, BeforeAgent's
    (UserPromptSubmit) a part after it, AfterTool's (PostToolUse) is appended to the
    tool's result. A prompt that is a nudge or an AfterAgent reason (a digest) is the
    office's text whole."""
    for content in body.get("contents") or []:
        if content.get("role") != "user":
            continue
        prompted = False
        for part in content.get("parts") or []:
            answer = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(answer, dict):
                for match in HOOK_CONTEXT.finditer(json.dumps(answer)):
                    yield "PostToolUse", match.group(1).strip()
                continue
            text = str(part.get("text", "")) if isinstance(part, dict) else ""
            for match in HOOK_CONTEXT.finditer(text):
                yield "UserPromptSubmit" if prompted else "SessionStart", match.group(1).strip()
            prompt = HOOK_CONTEXT.sub("", text).strip()
            if prompt and not prompt.startswith("<session_context>"):
                prompted = True
            if prompt.startswith("You have ") and "Run hive inbox" in prompt:
                yield "nudge", prompt
            elif DIGEST_END in prompt:
                yield "Stop", prompt


def gemini_turns(bodies: list[Any]) -> int:
    """Requests that start a turn: their last user content is a prompt, not results."""
    turns = 0
    for body in bodies:
        users = [c for c in (body or {}).get("contents") or [] if c.get("role") == "user"]
        parts = users[-1].get("parts") or [] if users else []
        turns += any("text" in p for p in parts) and not any("functionResponse" in p for p in parts)
    return turns


HOOK_PROMPT = re.compile(r"\A<hook_prompt [^>]*>(.*)</hook_prompt>\Z", re.S)


def codex_injected(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, office text) for every piece of coordination text in one Codex request.
    Codex 0.169 puts hook additional context in a `developer` message of its own
    (SessionStart's ahead of the first prompt, UserPromptSubmit's after the prompt,
    PostToolUse's after a tool's output) and a Stop block's reason in a user message
    wrapped in `<hook_prompt>`; the identity the office writes as the desk's AGENTS.md
    comes as a user message "# AGENTS.md instructions", and the office's first prompt
    (the turn that opens the session) as a user message of its own."""
    from hive_core.agents.codex import START_PROMPT
    from hive_core.demo.scripted_model.responses import item_texts

    after = ""  # what the previous item was: "prompt" or "tool"
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            after = "tool"
            continue
        if item.get("type") != "message" or item.get("role") == "assistant":
            continue
        for text in item_texts(item):
            wrapped = HOOK_PROMPT.match(text.strip())
            if item.get("role") == "developer":
                if DIGEST_END in text:
                    yield ("PostToolUse" if after == "tool" else "UserPromptSubmit"), text
                elif text.startswith("You are ") and "(id " in text:
                    yield "SessionStart", text
            elif wrapped:
                yield "Stop", wrapped.group(1)
            elif text.startswith("You have ") and "Run hive inbox" in text:
                yield "nudge", text
                after = "prompt"
            elif text.startswith("# AGENTS.md instructions"):
                yield "AGENTS.md", text
            elif text == START_PROMPT:
                yield "first prompt", text
                after = "prompt"
            elif not text.startswith("<"):
                after = "prompt"


def codex_turns(bodies: list[Any]) -> int:
    """Requests that start a turn: the last input item is a user message (past the
    developer messages of hook context that follow a prompt)."""
    turns = 0
    for body in bodies:
        items = [
            i
            for i in (body or {}).get("input") or []
            if isinstance(i, dict) and i.get("role") != "developer"
        ]
        last = items[-1] if items else {}
        turns += last.get("type") == "message" and last.get("role") == "user"
    return turns


def is_codex(bodies: list[Any]) -> bool:
    return bool(bodies) and "input" in (bodies[0] or {})


def claude_turns(bodies: list[Any]) -> int:
    """Requests that start a turn: their last user message holds no tool result."""
    turns = 0
    for body in bodies:
        users = [m for m in (body or {}).get("messages") or [] if m.get("role") == "user"]
        content = users[-1].get("content") if users else None
        blocks = content if isinstance(content, list) else []
        turns += bool(users) and not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
        )
    return turns


def context_figures(requests: dict[str, list[Any]]) -> Context:
    context = Context()
    for bodies in requests.values():
        if is_codex(bodies):
            seen_c: Counter[tuple[str, str]] = Counter()
            for body in bodies:
                here_c = Counter(codex_injected(body or {}))
                for key, count in here_c.items():
                    for _ in range(count - seen_c[key]):
                        context.add(*key)
                    seen_c[key] = max(seen_c[key], count)
            continue
        if bodies and "contents" in (bodies[0] or {}):
            seen_g: Counter[tuple[str, str]] = Counter()
            for body in bodies:
                here_g = Counter(gemini_injected(body or {}))
                for key, count in here_g.items():
                    for _ in range(count - seen_g[key]):
                        context.add(*key)
                    seen_g[key] = max(seen_g[key], count)
            continue
        # The CLI resends the conversation: a text counts only where it first appears, or
        # again if a later request holds more copies of it than any before (injected anew).
        seen: Counter[tuple[str, str]] = Counter()
        for body in bodies:
            here: Counter[tuple[str, str]] = Counter()
            for message in (body or {}).get("messages") or []:
                for plain, text in message_texts(message):
                    here.update(injected_segments(text, plain))
            for key, n in here.items():
                for _ in range(n - seen[key]):
                    context.add(*key)
                seen[key] = max(seen[key], n)
    return context


# --- reporting -------------------------------------------------------------------------


@dataclass
class Figures:
    run: Run
    mail: Mail
    wake: Wake
    context: Context

    def summary(self) -> dict[str, float]:
        c = self.context
        entries = c.entries(*DIGEST_KINDS)
        per_digest = c.per_digest(*DIGEST_KINDS)
        sessions = c.count("SessionStart")
        return {
            "messages sent (route)": self.mail.sent,
            "copies delivered": self.mail.copies,
            "copies consumed": self.mail.consumed,
            "copies not consumed": self.mail.copies - self.mail.consumed,
            "batches nudged": self.wake.batches,
            "nudges": self.wake.nudges,
            "max nudges per batch": self.wake.max_per_batch,
            "mean nudges per batch": self.wake.mean_per_batch,
            "batches retried": self.wake.retried,
            "duplicate nudges": self.wake.duplicates,
            "Stop-drain deliveries": self.mail.drains,
            "digest bytes per entry": c.total(*DIGEST_KINDS) / entries if entries else 0.0,
            "worst digest bytes per entry": max(per_digest, default=0.0),
            "longest digest line (bytes)": c.longest_entry_line(*DIGEST_KINDS, "SessionStart"),
            "nudge prompt bytes (mean)": (
                c.total("nudge") / c.count("nudge") if c.count("nudge") else 0.0
            ),
            "SessionStart bytes per session": c.total("SessionStart") / sessions if sessions else 0,
            "seconds to finish": self.run.seconds,
        }


TARGETS = {
    "copies not consumed": "0",
    "max nudges per batch": f"<= {TARGET_NUDGES_PER_BATCH}",
    "duplicate nudges": f"{TARGET_DUPLICATES}",
    "digest bytes per entry": f"<= {TARGET_DIGEST_BYTES_PER_ENTRY}",
    "worst digest bytes per entry": f"<= {TARGET_DIGEST_BYTES_PER_ENTRY}",
}


def fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def print_run(n: int, f: Figures) -> None:
    m, w, c = f.mail, f.wake, f.context
    state = "finished" if f.run.finished else "NOT finished (timeout)"
    print(f"\n=== run {n}: scenario {state} in {f.run.seconds:.1f} s  (home {f.run.home})")
    print(
        f"mail     sent {m.sent} (+{m.office_sent} from the office), copies delivered "
        f"{m.copies}, consumed {m.consumed}, not consumed {m.copies - m.consumed}"
    )
    for item in m.left_unread:
        print(f"         not consumed: {item}")
    print(
        f"wake     {w.nudges} nudge(s) for {w.batches} batch(es): max {w.max_per_batch}, "
        f"mean {w.mean_per_batch:.2f} per batch; retried {w.retried}, unconfirmed "
        f"{w.unconfirmed}, duplicates {w.duplicates}, manager told {w.told_manager}"
    )
    print("         nudges by agent: " + ", ".join(f"{a} {n}" for a, n in w.by_agent.items()))
    drains = ", ".join(f"{a} {n}" for a, n in sorted(m.drains_by_agent.items())) or "none"
    print(f"         batches delivered by the Stop-hook drain instead: {m.drains} ({drains})")
    for agent, bodies in f.run.requests.items():
        gemini = bool(bodies) and "contents" in (bodies[0] or {})
        if not is_codex(bodies):  # a codex desk has its own line, below
            own = context_figures({agent: bodies})
            turns = gemini_turns(bodies) if gemini else claude_turns(bodies)
            kinds = ("Stop", "UserPromptSubmit", "PostToolUse", "nudge", "SessionStart")
            print(
                f"desk     {agent} ({'gemini' if gemini else 'claude'}): {len(bodies)} "
                f"requests, {turns} turns, nudged "
                f"{w.by_agent.get(agent, 0)}, Stop-drained {m.drains_by_agent.get(agent, 0)}; "
                f"office context {own.total(*kinds)} bytes = "
                f"{own.total(*kinds) / max(turns, 1):.0f} per turn ("
                + ", ".join(f"{k} {own.total(k)}" for k in kinds)
                + ")"
            )
        if is_codex(bodies):
            own = context_figures({agent: bodies})
            turns = codex_turns(bodies)
            kinds = ("Stop", "UserPromptSubmit", "PostToolUse", "nudge", "SessionStart")
            extra = ("AGENTS.md", "first prompt")
            print(
                f"codex    {agent}: {len(bodies)} requests, {turns} turns, nudged "
                f"{w.by_agent.get(agent, 0)}, Stop-drained {m.drains_by_agent.get(agent, 0)}; "
                f"office context {own.total(*kinds)} bytes = "
                f"{own.total(*kinds) / max(turns, 1):.0f} per turn ("
                + ", ".join(f"{k} {own.total(k)}" for k in kinds)
                + "); per session also "
                + ", ".join(f"{k} {own.total(k)}" for k in extra)
            )
    print("context  kind              texts  entries  bytes  bytes/entry")
    for kind in ("Stop", "UserPromptSubmit", "PostToolUse", "nudge", "SessionStart"):
        count, entries, total = c.count(kind), c.entries(kind), c.total(kind)
        ratio = f"{total / entries:.0f}" if entries and kind in DIGEST_KINDS else "-"
        print(f"         {kind:<16} {count:>6} {entries:>8} {total:>6}  {ratio:>11}")
    s = f.summary()
    entries = c.entries(*DIGEST_KINDS)
    print(
        f"         digests (Stop+UPS+PTU): {c.total(*DIGEST_KINDS)} bytes / {entries} "
        f"entries = {fmt(s['digest bytes per entry'])} bytes per entry (worst digest "
        f"{fmt(s['worst digest bytes per entry'])}; target <= {TARGET_DIGEST_BYTES_PER_ENTRY})"
    )
    print(f"         longest digest line: {s['longest digest line (bytes)']} bytes")
    sessions = c.count("SessionStart")
    print(
        f"         SessionStart (per session, not per message): {sessions} session(s), "
        f"{c.total('SessionStart')} bytes, {fmt(s['SessionStart bytes per session'])} per session"
    )


def print_summary(all_figures: list[Figures], desks: str = "claude CLIs") -> None:
    runs = len(all_figures)
    finished = sum(1 for f in all_figures if f.run.finished)
    print(f"\n=== summary: median of {runs} run(s), {finished} finished before the timeout")
    rows = [f.summary() for f in all_figures]
    width = max(len(k) for k in rows[0])
    print(f"{'figure':<{width}}  {'median':>8}  {'per run':<24}  target")
    for key in rows[0]:
        values = [r[key] for r in rows]
        per_run = " ".join(fmt(v) for v in values)
        median = fmt(statistics.median(values))
        print(f"{key:<{width}}  {median:>8}  {per_run:<24}  {TARGETS.get(key, '')}")
    copies = sum(f.mail.copies for f in all_figures)
    consumed = sum(f.mail.consumed for f in all_figures)
    batches = sum(f.wake.batches for f in all_figures)
    drains = sum(f.mail.drains for f in all_figures)
    print(
        f"\nall runs: {consumed}/{copies} copies consumed; {batches} batch(es) woken by a "
        f"nudge and {drains} by the Stop-hook drain; worst batch "
        f"{max(f.wake.max_per_batch for f in all_figures)} nudge(s); "
        f"{sum(f.wake.duplicates for f in all_figures)} duplicate(s)"
    )
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    worst_batch = max(f.wake.max_per_batch for f in all_figures)
    duplicates = sum(f.wake.duplicates for f in all_figures)
    worst_digest = max(r["worst digest bytes per entry"] for r in rows)
    figure(
        f"liveness, three-agent scenario ({desks} against a scripted model)",
        f"{finished}/{runs} run(s) finished, median {med['seconds to finish']:.0f} s: "
        f"{fmt(med['messages sent (route)'])} messages routed, {consumed}/{copies} copies "
        f"consumed; {batches} batch(es) nudged, max {worst_batch} nudge(s) per batch, "
        f"{duplicates} duplicates; digests {fmt(med['digest bytes per entry'])} bytes per "
        f"listed message (worst {fmt(worst_digest)}); a nudge prompt "
        f"{fmt(med['nudge prompt bytes (mean)'])} bytes; SessionStart context "
        f"{fmt(med['SessionStart bytes per session'])} bytes per session",
        target=f"every message consumed, <= {TARGET_NUDGES_PER_BATCH} nudge per batch, "
        f"{TARGET_DUPLICATES} duplicates, <= {TARGET_DIGEST_BYTES_PER_ENTRY} bytes per digest entry",
        ok=finished == runs
        and consumed == copies
        and worst_batch <= TARGET_NUDGES_PER_BATCH
        and duplicates <= TARGET_DUPLICATES
        and worst_digest <= TARGET_DIGEST_BYTES_PER_ENTRY,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep each run's home")
    parser.add_argument("--quick", action="store_true", help="one run (for bench/run_all)")
    parser.add_argument(
        "--gemini", action="store_true", help="jim's desk runs the Gemini CLI (scripted API)"
    )
    parser.add_argument(
        "--codex", action="store_true", help="pam's desk runs the Codex CLI (scripted API)"
    )
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    saved_env = dict(os.environ)
    all_figures = []
    for n in range(1, args.runs + 1):
        run = run_once(
            args.timeout, ("jim",) if args.gemini else (), ("pam",) if args.codex else ()
        )
        os.environ.clear()
        os.environ.update(saved_env)
        paths = HivePaths(run.home)
        figures = Figures(
            run, mail_figures(paths), wake_figures(run.stats), context_figures(run.requests)
        )
        print_run(n, figures)
        if not args.keep:
            shutil.rmtree(run.home, ignore_errors=True)
        all_figures.append(figures)
    desks = "claude CLIs"
    if args.gemini:
        desks += ", jim on the Gemini CLI"
    if args.codex:
        desks += ", pam on the Codex CLI"
    print_summary(all_figures, desks)


if __name__ == "__main__":
    main()
