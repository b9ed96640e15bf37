"""`hive`: mail, board, triage, roster and log, for the agents and the person.

Sending writes a draft into the caller's own outbox (the router delivers it, now or
when the office starts); everything else reads the caller's own folders or plain files
of the hive. Who the caller is, the office decides while it runs (hive_core/caller.py).

This is the console script's entry point, and agents start it on every mail action.
While an office runs, the office runs the verb and this process only sends it and shows
its output (hive_client/client.py, which imports nothing of hive_core); the verbs that
stay in the caller's process are listed there. Run here, the mail verbs run from
cli/mail_cmd.py without importing click (or asyncio, or the memory index); every other
verb goes to the click group in cli/group.py.

Exit codes: 0 done; 1 refused or not found (the office state says no); 2 the command
line or the environment is wrong. Every failure is one sentence on stderr that says
what to do.

On a remote desk's host (HIVE_REMOTE=1 and HIVE_CONTROL set) nothing of this runs there:
every verb goes to the office over the desk's forwarded socket, which runs it as the
desk (hive_core/office/verbs.py; hive_core/remote/relay.py for those that stay apart).
"""

from __future__ import annotations

import gc
import os
import sys


def main(argv: list[str] | None = None) -> None:
    """The console script. While an office runs it runs the verb (hive_client/client.py),
    else (or for a verb that stays here) this process does, as `run` below. Words given
    (`argv`, as tests give them) run here, unless on a remote desk's host."""
    args = sys.argv[1:] if argv is None else argv
    if argv is None or (os.environ.get("HIVE_REMOTE") == "1" and os.environ.get("HIVE_CONTROL")):
        from hive_client.client import run as in_office

        try:
            code = in_office(args)
        except KeyboardInterrupt:
            # Ctrl+C while waiting for the office or typing a body: as a shell says it.
            code = 130
        if code is not None:
            if argv is None:
                # Nothing is left to clean up, and an interpreter's shutdown is a tenth
                # of what this call costs.
                os._exit(code if 0 <= code <= 255 else 1)
            raise SystemExit(code)
    # A mail verb lives for a few milliseconds and frees everything at exit; the cyclic
    # collector would only rescan what its imports allocate (a tenth of its start-up).
    # Back on before the other verbs, some of which run for hours (`log -f`, `mcp`).
    gc.disable()
    try:
        _import_msgspec()
        done = _mail_verb(args)
    finally:
        gc.enable()
    if not done:
        _click(args)


def run(args: list[str]) -> None:
    """`hive ARGS` in this process as it is: what the office runs for a caller on one of
    its threads (office/verbs.py). Ends with SystemExit when the verb does not succeed."""
    if not _mail_verb(args):
        _click(args)


def warm() -> None:
    """Import what the verbs use, so that the office's first verb does not wait for it."""
    import importlib

    for module in ("hive_core.cli.mail_cmd", "hive_core.cli.group"):
        importlib.import_module(module)


def _mail_verb(args: list[str]) -> bool:
    """Run `args` if it is a mail verb (cli/mail_cmd.py, without click); False if not."""
    # After msgspec: everything of the office's below imports it.
    from hive_core.cli.common import one_line_errors, split_home

    home, rest = split_home(args)
    with one_line_errors():
        from hive_core.cli import mail_cmd

        if rest and rest[0] in mail_cmd.MAIL_VERBS:
            mail_cmd.run_verb(rest[0], rest[1:], home)
            return True
    return False


def _click(args: list[str]) -> None:
    from hive_core.cli.common import one_line_errors
    from hive_core.cli.group import cli

    with one_line_errors():
        cli.main(args, prog_name="hive")


def _import_msgspec() -> None:
    """msgspec, imported with typing_extensions hidden from it.

    msgspec takes `get_type_hints` from typing_extensions when it can import it, and
    from `typing` otherwise; on Python 3.11 both read the office's Structs alike. But
    typing_extensions imports inspect (and with it ast, dis, tokenize): a fifth of what
    a mail verb costs. Shown again at once, to whatever imports it later.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    import importlib

    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        importlib.import_module("msgspec")
    except ImportError:
        pass  # a msgspec that cannot do without it gets it just below
    finally:
        del sys.modules["typing_extensions"]
    importlib.import_module("msgspec")


if __name__ == "__main__":
    main()
