"""The mail verbs of `hive`: send, reply, inbox, read, done.

Agents run them on every mail action, so this module and what it imports are their
whole path (cli/hive.py runs them): no click, no asyncio, nothing of memory. Their
words are parsed by cli/argv.py, which follows click's rules and texts, so they read
like the other verbs (cli/group.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import msgspec

from hive_core import mail, render
from hive_core.cli import argv
from hive_core.cli.argv import Argument, Option, Spec
from hive_core.cli.common import (
    HOME_HELP,
    USAGE,
    BadUsage,
    HiveError,
    body_text,
    open_caller,
    post,
)
from hive_core.schema import ACTS, Act, Draft


def _missing(message_id: str) -> HiveError:
    return HiveError(
        f"no message {message_id!r} in your inbox, inbox/.done or sent mail. "
        "`hive inbox` lists the unread ids."
    )


# --- the mail verbs ---------------------------------------------------------------------


def send(args: dict[str, Any], home: str | None) -> None:
    caller = open_caller(home)
    draft = Draft(
        to=args["to"],
        act=cast(Act, args["act"]),
        subject=args["subject"].strip(),
        body=body_text(args["body"], args["dash"]),
        task=args["task"] or None,
        needs_human=args["needs_human"],
    )
    post(caller, draft, as_json=args["json"])


def reply(args: dict[str, Any], home: str | None) -> None:
    caller = open_caller(home)
    found = mail.find_message(caller.box, args["msgid"])
    if found is None:
        raise _missing(args["msgid"])
    parent = found[0]
    if parent.sender == caller.who:
        raise BadUsage(
            f"{args['msgid']} is a message you sent; to follow it up, use "
            f"`hive send --to {parent.to}` instead.",
        )
    problem = mail.check_recipient(caller.config, caller.who, parent.sender)
    if problem:
        raise HiveError(f"cannot reply to {args['msgid']} from {parent.sender}: {problem}")
    body = body_text(args["body"], args["dash"])
    draft = mail.reply_draft(parent, cast(Act, args["act"]), body, needs_human=args["needs_human"])
    post(caller, draft)


def inbox(args: dict[str, Any], home: str | None) -> None:
    caller = open_caller(home)

    def skipped(path: Path, why: str) -> None:
        # Anyone can drop a file in an inbox folder; it must not hide the real mail.
        print(
            f"hive: skipped {render.preview(path.name)} in your inbox: {render.preview(why, 200)}",
            file=sys.stderr,
        )

    messages = list(mail.iter_inbox(caller.box, skipped))
    print(msgspec.json.encode(messages).decode() if args["json"] else render.inbox(messages))


def read(args: dict[str, Any], home: str | None) -> None:
    caller = open_caller(home)
    found = mail.find_message(caller.box, args["msgid"])
    if found is None:
        raise _missing(args["msgid"])
    message, path = found
    if args["json"]:
        print(msgspec.json.encode(message).decode())
        return
    box = caller.box
    state = {box.inbox: "unread", box.done: "done", box.sent: "sent"}.get(path.parent, "")
    print(render.message(message, state))


def done(args: dict[str, Any], home: str | None) -> None:
    if bool(args["msgids"]) == args["all"]:
        raise BadUsage("give message ids or --all, not both and not neither.")
    box = open_caller(home).box
    ids = list(args["msgids"]) or [path.stem for path in mail.message_files(box.inbox)]
    marked, already, missing = [], [], []
    for message_id in ids:
        if mail.mark_done(box, message_id):
            marked.append(message_id)
        elif (found := mail.find_message(box, message_id)) and found[1].parent == box.done:
            already.append(message_id)
        else:
            missing.append(message_id)
    if args["all"] and not ids:
        print("No unread mail; nothing to mark.")
    if marked:
        noun = "message" if len(marked) == 1 else "messages"
        print(f"marked {len(marked)} {noun} done")
    if already:
        print(f"already done: {', '.join(already)}")
    if missing:
        raise HiveError(
            f"not in your inbox: {', '.join(missing)}. `hive inbox` lists the unread ids."
        )


# --- their command lines ----------------------------------------------------------------

_HOME = Option("--home", HOME_HELP, "DIR")
_NEEDS_HUMAN = Option("--needs-human", "Ask the manager to bring the person in.")
_DASH = Argument("dash", "-", "optional")
_MSGID = Argument("msgid", "MSGID", "one")


def _act(help_text: str) -> Option:
    return Option("--act", help_text, "ACT", ACTS, default="inform")


class Verb(NamedTuple):
    spec: Spec
    run: Callable[[dict[str, Any], str | None], None]


MAIL_VERBS: dict[str, Verb] = {
    "send": Verb(
        Spec(
            "hive send",
            """Send a message (it goes to your outbox; the office delivers it).

  hive send --to jim --act request --subject "Review the parser" --body "See #12"
  hive send --to god --subject "Blocked on the API key" --needs-human --body "..."
  git diff | hive send --to pam --act propose --subject "Patch for the lexer" -""",
            (
                Option(
                    "--to",
                    "An agent id, or god (the manager), human, broadcast, triage.",
                    "ID",
                    required=True,
                ),
                _act("request, query and propose expect a reply; the others end a thread."),
                Option("--subject", "One line, at most 200 characters.", "TEXT", default=""),
                Option("--task", "The task id this message is about.", "TASK"),
                _NEEDS_HUMAN,
                Option("--body", "The message; `-` reads it from stdin.", "TEXT"),
                Option(
                    "--json",
                    'Say where it went as JSON: {"path": its file under the hive, '
                    '"delivered_now": false while no office runs}.',
                ),
                _HOME,
            ),
            (_DASH,),
        ),
        send,
    ),
    "reply": Verb(
        Spec(
            "hive reply",
            """Answer message MSGID: to its sender, in its thread, subject "Re: ...".

  hive reply 20261130T093450123456Z-1a2b3c --act agree --body "On it."
  hive reply 20261130T093450123456Z-1a2b3c --act done - < summary.md""",
            (
                _act("agree, refuse, done, inform; or request/query/propose to ask back."),
                _NEEDS_HUMAN,
                Option("--body", "The reply; `-` reads it from stdin.", "TEXT"),
                _HOME,
            ),
            (_MSGID, _DASH),
        ),
        reply,
    ),
    "inbox": Verb(
        Spec(
            "hive inbox",
            """List your unread messages, oldest first.

  hive inbox
  hive inbox --json | jq '.[].id'""",
            (Option("--json", "A JSON list of messages."), _HOME),
        ),
        inbox,
    ),
    "read": Verb(
        Spec(
            "hive read",
            """Show message MSGID in full (unread, done, or one you sent).

Reading does not mark it processed; `hive done MSGID` does.

  hive read 20261130T093450123456Z-1a2b3c""",
            (Option("--json", "The message as JSON."), _HOME),
            (_MSGID,),
        ),
        read,
    ),
    "done": Verb(
        Spec(
            "hive done",
            """Mark messages processed (moved to inbox/.done, kept for the record).

Do it after you have acted on a message, not when you have only read it.

  hive done 20261130T093450123456Z-1a2b3c
  hive done --all""",
            (Option("--all", "Every unread message."), _HOME),
            (Argument("msgids", "MSGID", "many"),),
        ),
        done,
    ),
}


def _help_width() -> int:
    # As click sizes it for `hive` (COLUMNS, else the terminal; max_content_width 100),
    # without importing shutil.
    columns = os.environ.get("COLUMNS", "")
    if not columns.isdigit():
        try:
            columns = str(os.get_terminal_size().columns)
        except OSError:
            columns = "80"
    return max(min(int(columns), 100) - 2, 50)


def run_verb(verb: str, args: list[str], home: str | None) -> None:
    """Run a mail verb; `home` is a --home given before the verb (one after it wins)."""
    spec, run = MAIL_VERBS[verb]
    try:
        values = argv.parse(spec, args)
    except argv.UsageError as e:
        print(argv.usage_error(spec, e), file=sys.stderr)
        raise SystemExit(USAGE) from None
    if values is None:
        print(argv.help_text(spec, _help_width()))
        return
    run(values, values["home"] or home)
