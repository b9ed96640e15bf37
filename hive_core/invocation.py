"""Whose `hive` verb this thread runs: the process's own, or a caller's the office runs.

A `hive` process reads its environment, cwd and the files its command line names, and
asks the office over the control socket who it is. When the office runs the verb
instead (the thin `hive`, hive_core/office/verbs.py), the thread running it is the
office's, whose environment, cwd and process say nothing of the caller: the verb reads
them here, from the Invocation the office set for that thread; a named file is read by
the caller's own process, with what it may read (a contained desk reads less than the
office); and the office's questions (whoami, the person's check) are answered as the
caller the control socket attributed (control.ControlServer.decide), never as the
office's own process.

Standard library only, and cheap: every `hive` process imports it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from hive_core.schema import ControlReply, ControlRequest


class Invocation(NamedTuple):
    """A verb the office runs for a caller: its office home, the environment it claims
    (HIVE_AGENT_ID, HIVE_SECRET; a remote desk's HIVE_REMOTE_CWD), its cwd, the
    office's answer to a control request as that caller, a file the command line names
    (at most so many bytes, None: all) as the caller reads it, in its own process
    (OSError if it cannot), and the outboxes to look at after."""

    home: Path
    env: Mapping[str, str]
    cwd: str
    ask: Callable[[ControlRequest], ControlReply]
    read: Callable[[str, int | None], bytes]
    # Outboxes the verb changed: the office looks at them once the caller is answered
    # (kick.py).
    kicks: list[str]


# Set by the office in a verb it runs for a remote desk (office/verbs.py and
# remote/relay.py set it, cli/common.py reads it): the desk's cwd on its host. The verb
# runs on the office's machine as the desk, so nothing on its command line may name this
# machine's files.
RELAYED_ENV = "HIVE_REMOTE_CWD"

_current: ContextVar[Invocation | None] = ContextVar("hive_invocation", default=None)


def current() -> Invocation | None:
    return _current.get()


def getenv(name: str) -> str | None:
    """The caller's environment variable `name`."""
    invocation = _current.get()
    return (os.environ if invocation is None else invocation.env).get(name)


def getcwd() -> str:
    """The caller's working directory."""
    invocation = _current.get()
    return os.getcwd() if invocation is None else invocation.cwd


@contextlib.contextmanager
def running(invocation: Invocation) -> Iterator[None]:
    """Run the block (on this thread) as `invocation`'s verb."""
    token = _current.set(invocation)
    try:
        yield
    finally:
        _current.reset(token)
