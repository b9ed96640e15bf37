"""The `hive` command lines the app runs as the person, through the office (link.hive).

The app changes nothing in the hive itself: what the person sends, retries, merges,
forgets or edits is the verb a person's `hive` runs, run by the office (its checks, its
log, its nudge of the router), so the app and the command line cannot differ. Each
function here is the command line of one thing the app does; the words are the verb's
own options (`hive VERB --help`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hive_client.aio import VerbResult
from hive_core.schema import Draft

Run = Callable[[list[str], bytes], Awaitable[VerbResult]]
"""`hive ARGV` with STDIN, run by the office as the person (OfficeLink.hive)."""


def send(draft: Draft) -> tuple[list[str], bytes]:
    """`hive send` of the draft, its body on stdin (a body is not a command-line word:
    any length, any first character)."""
    argv = ["send", "--to", draft.to, "--act", draft.act, "--subject", draft.subject]
    if draft.task:
        argv += ["--task", draft.task]
    if draft.needs_human:
        argv.append("--needs-human")
    return [*argv, "--body", "-"], draft.body.encode()


def retry(task_id: str, to: str | None) -> list[str]:
    return ["task", "retry", task_id, *(["--to", to] if to else [])]


def merge(agent: str, *, dry_run: bool) -> list[str]:
    return ["merge", *(["--dry-run"] if dry_run else []), "--", agent]


def forget(entry_id: str) -> list[str]:
    return ["memory", "forget", "--", entry_id]


def edit(entry_id: str, text: str) -> tuple[list[str], bytes]:
    return ["memory", "edit", "--text", "-", "--", entry_id], text.encode()


def sentence(text: str) -> str:
    """A verb's line (`forgot 3f9c...`) as the app says it: a capital, a full stop."""
    text = text.strip()
    return f"{text[:1].upper()}{text[1:]}{'' if text.endswith('.') else '.'}" if text else text
