"""The tidy's effects: fold an agent's notes into its bounded memory index on disk.

    tidy(paths, agent_id, budget=..., summariser=None) -> Fold | None
    summariser_for(spec, cwd, env=None) -> Summariser | None   (the agent's own CLI)

What to fold and whether a summary checks out is decided in memory/fold.py (pure).
`memory.md` is the index the agent reads at start; `hive memory note` appends to its
notes (Mailbox.notes). A tidy writes, in this order, so that a crash between two steps
duplicates material at worst and never loses it:

1. the archive (Mailbox.archive): what leaves the index, and (on the summariser path)
   the notes' own words; append-only and indexed by the search, so nothing folded is
   unfindable;
2. `memory.md`: the new index, atomically, within the budget;
3. the change list (Mailbox.changes): a dated section listing every change (added,
   updated, removed) with its reason, so `git log -p` of the hive shows what the tidy
   did and why;
4. the notes: the notes just folded are dropped; any appended meanwhile stay.

The summariser path asks the agent's own CLI, headless and without tools, to condense;
how is its provider's business (`Provider.summary_command`). Its answer is checked
(within budget, every note accounted for) and anything wrong falls back to the rule,
which never loses a note. The CLI runs in a session of its own, named while it runs
(`summarising`): whatever it starts (a hook the agent configured in its project, say)
is that agent's to the office, never the office's or the person's (control.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from hive_core.agents.provider import SummaryCommand, SummaryRequest
from hive_core.agents.providers import providers
from hive_core.fsio import atomic_write
from hive_core.memory.fold import (
    ANSWER_SCHEMA,
    SYSTEM_PROMPT,
    Fold,
    Note,
    Summariser,
    SummaryError,
    archive_section,
    changes_section,
    check_answer,
    check_budget,
    choose_fold,
    parse_notes,
    size,
    summary_prompt,
)
from hive_core.memory.sources import confined, entries_for, read_whole
from hive_core.memory.store import MemoryStore, open_store
from hive_core.paths import HivePaths, Mailbox
from hive_core.schema import AgentSpec

# How long the summariser may take before the rule does the job instead.
SUMMARY_TIMEOUT_S = 300.0
SUMMARY = SummaryRequest(system_prompt=SYSTEM_PROMPT, schema=ANSWER_SCHEMA)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def notes_lock(box: Mailbox) -> contextlib.AbstractContextManager[None]:
    """Held only while the notes are read and while the folded notes are dropped, so a
    note written meanwhile is never lost (an appender that takes it too cannot slip in
    between the last read and the rename) and never waits on a summariser."""
    return _locked(box.notes_lock)


def tidy_lock(box: Mailbox) -> contextlib.AbstractContextManager[None]:
    """One tidy at a time per agent; a second one waits and then finds the notes gone."""
    return _locked(box.tidy_lock)


# --- the summariser: the agent's own CLI, headless, no tools ---------------------------


def summariser_for(
    spec: AgentSpec,
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = SUMMARY_TIMEOUT_S,
) -> Summariser | None:
    """The agent's own CLI as a summariser, where its provider offers one."""
    command = providers()[spec.provider].summary_command(spec, SUMMARY)
    if command is None:
        return None

    def summarise(index: str, notes: Sequence[Note], budget: int) -> Fold:
        prompt = summary_prompt(index, notes, budget)
        answer = ask(command, prompt, env=env, cwd=cwd, timeout=timeout, agent=spec.id)
        return check_answer(answer, notes, budget)

    return summarise


# The summarising CLIs running now, by pid: the agent each runs for.
_SUMMARISING: dict[int, str] = {}
_SUMMARISING_LOCK = threading.Lock()


def summarising() -> dict[int, str]:
    """Each summarising CLI running now (the leader of its own session), by pid: the
    agent it is, as the control socket attributes it and strays.py leaves it be."""
    with _SUMMARISING_LOCK:
        return dict(_SUMMARISING)


def ask(
    command: SummaryCommand,
    prompt: str,
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    timeout: float,
    agent: str = "",
) -> object:
    """Run `command` with `prompt` on stdin (an index and notes can outgrow an argv
    string) as `agent`'s; its structured answer, or SummaryError saying why there is
    none."""
    program = command.argv[0]
    try:
        with subprocess.Popen(
            command.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
        ) as proc:
            with _SUMMARISING_LOCK:
                _SUMMARISING[proc.pid] = agent
            try:
                out, err = proc.communicate(prompt.encode(), timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise
            finally:
                with _SUMMARISING_LOCK:
                    _SUMMARISING.pop(proc.pid, None)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SummaryError(f"could not run {program}: {e}") from None
    if proc.returncode != 0:
        tail = (err or out).decode(errors="replace").strip()[-300:]
        raise SummaryError(f"{program} exited with {proc.returncode}: {tail}")
    try:
        return command.answer(out)
    except ValueError as e:
        raise SummaryError(str(e)) from None


# --- the tidy itself -------------------------------------------------------------------


def append_text(path: Path, text: str) -> None:
    # A single O_APPEND write: readers and a concurrent appender never see half of it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def tidy(
    paths: HivePaths,
    agent_id: str,
    *,
    budget: int,
    summariser: Summariser | None = None,
    store: MemoryStore | None = None,
    now: datetime | None = None,
) -> Fold | None:
    """Fold `agent_id`'s notes into its index (see the module docstring for the order of
    writes) and bring the search index up to date, through `store` or one opened for the
    call. `budget` is office.toml's `memory_budget`. None when there was nothing to do:
    no notes and the index within budget. OutsideOwner if one of the agent's memory
    files is a symlink out of its folder."""
    check_budget(budget)
    box = paths.mailbox(agent_id)
    now = now or datetime.now(UTC)
    # Everything the tidy reads or appends to stays in the agent's folder: a symlink out
    # (archive.md -> another's notes) stops it before it reads or writes anything.
    for file in (box.notes, box.memory, box.archive, box.changes):
        confined(paths, file)
    with tidy_lock(box):
        with notes_lock(box):
            raw = _read(box.notes)
        index = _read(box.memory)
        notes = parse_notes(raw)
        if not notes and size(index) <= budget:
            return None
        fold = choose_fold(index, notes, budget, summariser)
        if fold.archived:
            append_text(box.archive, archive_section(fold, now))
        atomic_write(box.memory, fold.index.encode())
        append_text(box.changes, changes_section(fold, len(notes), budget, now))
        with notes_lock(box):
            # Notes appended while the summariser ran stay for the next tidy.
            atomic_write(box.notes, _read(box.notes).removeprefix(raw).encode())
    changes = entries_for(paths, [box.memory, box.notes, box.archive])
    if store is not None:
        store.apply(changes)
    else:
        with open_store(paths) as own:
            own.apply(changes)
    return fold


def _read(path: Path) -> str:
    return read_whole(path, "tidied")
