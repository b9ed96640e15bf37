"""Each agent's terminal as the office keeps it, so a client that attaches gets the
exact screen and scrollback at once (as tmux's server keeps its panes' grids).

One emulator per agent, fed every byte the agent writes, in the same call that hands
the bytes on to the clients; always the size of the agent's pty (read from the
supervisor before each feed, so whoever resized the pty, the screen follows before
the first byte written at the new size). The office's screen is the one that answers
the program's terminal queries (device attributes, cursor position): it exists with
or without clients, and it has the pty's size; clients must not answer them too.
"""

from __future__ import annotations

from hive_core.desks.supervisor import Supervisor
from hive_core.terminal.emulator import GhosttyEmulator


class PaneGrids:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._grids: dict[str, GhosttyEmulator] = {}

    def size(self, agent_id: str) -> tuple[int, int]:
        """The agent's pty size (rows, cols), also before it started."""
        sup = self._supervisor
        return sup.sizes.get(agent_id, sup.size)

    def screen(self, agent_id: str) -> GhosttyEmulator:
        rows, cols = self.size(agent_id)
        screen = self._grids.get(agent_id)
        if screen is None:
            screen = self._grids[agent_id] = GhosttyEmulator(rows, cols)
        else:
            screen.resize(rows, cols)  # a no-op when it has not changed
        return screen

    def feed(self, agent_id: str, data: bytes) -> None:
        screen = self.screen(agent_id)
        screen.feed(data)
        if replies := screen.take_replies():
            self._supervisor.write(agent_id, replies)

    def screen_text(self, agent_id: str) -> list[str]:
        """The agent's screen as text lines (what the office's status reads limits from)."""
        return self.screen(agent_id).screen_text()

    def snapshot(self, agent_id: str) -> tuple[int, int, bytes]:
        """(rows, cols, the snapshot) of the agent's terminal now."""
        screen = self.screen(agent_id)
        rows, cols = screen.size
        return rows, cols, screen.snapshot()
