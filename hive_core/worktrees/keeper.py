"""Removing a worktree, and the office's side: the keeper that makes, checks and
watches the desks' worktrees and warns when two branches touch a file."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from hive_core.ids import new_message_id
from hive_core.paths import HivePaths
from hive_core.remote.launch import LinkFailed
from hive_core.routing.rules import router_notice
from hive_core.schema import AgentSpec, Message, OfficeConfig
from hive_core.worktrees.git import (
    HostUnreachable,
    NoFolder,
    WorktreeError,
    halted_by,
    runner,
    stop_children,
)
from hive_core.worktrees.place import place, read_record, record_for, write_json
from hive_core.worktrees.plan import (
    Overlap,
    overlap_text,
    overlaps,
)
from hive_core.worktrees.review import changed_files, uncommitted

# --- removing ---------------------------------------------------------------------------


def remove(paths: HivePaths, agent_id: str) -> str:
    """Remove the agent's worktree folder; its branch stays. Refused while it holds
    uncommitted work."""
    record = record_for(paths, agent_id)
    run = runner(paths, record)
    try:
        left = uncommitted(record.path, run=run)
    except NoFolder:
        raise WorktreeError(
            f"{agent_id}'s worktree {run.where(record.path)} is already gone; its branch "
            f"{record.branch} stays"
        ) from None
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        raise WorktreeError(
            f"{agent_id}'s worktree has uncommitted work ({shown}); commit it there (or "
            "move it away) and try again. Nothing was removed"
        )
    run(["worktree", "remove", record.path], record.repo)
    paths.worktree_setup_marker(agent_id).unlink(missing_ok=True)
    return f"removed {run.where(record.path)}; the branch {record.branch} stays."


# --- the office's side ------------------------------------------------------------------


def read_overlaps(paths: HivePaths) -> list[Overlap]:
    """The files two agents' branches touch now, as of the keeper's last pass (told.json
    keeps every overlap ever warned of; this one forgets a pair once it is resolved)."""
    try:
        return msgspec.json.decode(paths.worktree_overlaps.read_bytes(), type=list[Overlap])
    except (FileNotFoundError, msgspec.DecodeError):
        return []


class WorktreeKeeper:
    """What a running office does with worktrees: place each agent before its start, and
    every office.worktree_check_s compare branches and warn (once per pair and file) of files
    two agents both change. Git runs on threads, never on the loop."""

    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        *,
        log: Callable[[str, str], None],
        report: Callable[[str, str | None], None],
        post: Callable[[str, Message], None],
    ) -> None:
        self.paths = paths
        self.config = config
        self.log = log
        self.report = report  # (component, detail or None to clear)
        self.post = post
        self._said: set[str] = set()
        self._halt = threading.Event()

    async def workplace(self, spec: AgentSpec) -> Path | None:
        """Where the agent's CLI starts (None: its roster cwd); a remote desk's is a
        folder on its host. Raises LinkFailed when that host cannot be reached (the
        supervisor's link-down path then retries the whole start)."""
        loop = asyncio.get_running_loop()
        try:
            placed = await loop.run_in_executor(None, place, self.paths, self.config, spec)
        except HostUnreachable as e:
            raise LinkFailed(e.reason) from None
        for note in placed.notes:
            if note not in self._said:
                self._said.add(note)
                self.log(spec.id, note)
        if placed.problem and placed.problem not in self._said:
            self._said.add(placed.problem)
            self.log(spec.id, placed.problem)
        self.report(f"worktree:{spec.id}", placed.problem)
        return placed.cwd

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                checking: asyncio.Future[Any] = loop.run_in_executor(None, self.check_overlaps)
                await asyncio.wait({checking, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not checking.done():
                    # A stop is never held up by a pass: its git children are killed,
                    # no other starts, and the pass's thread ends with their failure.
                    stop_children(self._halt)
                    return
                self._tell(checking.result())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.office.worktree_check_s)
        finally:
            stopping.cancel()

    def _tell(self, news: dict[tuple[str, str], list[str]]) -> None:
        for (first, second), files in news.items():
            for reader in dict.fromkeys([first, second, self.config.office.manager]):
                subject, body = overlap_text(first, second, files, reader)
                notice = router_notice(f"{new_message_id()}-overlap", reader, subject, body)
                self.post(reader, notice)
            self.log(first, f"told {second} and the manager that both change {', '.join(files)}")

    def check_overlaps(self) -> dict[tuple[str, str], list[str]]:
        """New overlaps by pair, remembered in run/ as told before anyone is told (a
        crash then loses a warning rather than repeating it)."""
        with halted_by(self._halt):
            return self._check_overlaps()

    def _check_overlaps(self) -> dict[tuple[str, str], list[str]]:
        changes: dict[str, list[str]] = {}
        for spec in self.config.agents:
            try:
                record = read_record(self.paths, spec.id)
                if record is None or spec.archived:
                    continue
                run = runner(self.paths, record)
                changes[spec.id] = [s.path for s in changed_files(record, run=run)]
            except NoFolder:
                continue
            except WorktreeError as e:
                if self._halt.is_set():
                    break
                # One unreadable worktree does not keep the others from being compared.
                if str(e) not in self._said:
                    self._said.add(str(e))
                    self.log(spec.id, f"its worktree cannot be compared with the others: {e}")
        if self._halt.is_set():
            return {}  # a pass cut short knows too little to change what was found
        found = overlaps(changes)
        if found != read_overlaps(self.paths):
            write_json(self.paths.worktree_overlaps, found)
        told_file = self.paths.worktree_told
        try:
            told = set(msgspec.json.decode(told_file.read_bytes(), type=list[Overlap]))
        except (FileNotFoundError, msgspec.DecodeError):
            told = set()
        news = [o for o in found if o not in told]
        if not news:
            return {}
        write_json(told_file, sorted(told | set(news)))
        by_pair: dict[tuple[str, str], list[str]] = {}
        for o in news:
            by_pair.setdefault((o.first, o.second), []).append(o.path)
        return by_pair
