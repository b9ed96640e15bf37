"""While the person types, the office's bulk work gives way.

A key's echo crosses four processes (tmux, the app, the office, the agent's shell) and
each hop waits for a CPU, and in the office for the interpreter too. A routing burst's
bulk work (claiming and placing thousands of files, staging them for a commit, indexing
them) would take both for seconds at a time. tmux answers a key before it parses more
output; the office's threads cannot be pre-empted that way, so each bulk thread calls
`give_way()` between two units of its work, and for as long as keys keep coming, it rests
REST_S after every SLICE_S of work: the burst takes longer, the keys wait less. With no
one typing, `give_way()` is one clock read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Keys this recent count as typing.
TYPING_WINDOW_S = 1.0
# While the person types, a bulk thread works this long, then rests this long.
SLICE_S = 0.004
REST_S = 0.004
# A thread that has not given way for this long was idle (between two routing passes,
# say) and starts a fresh slice: a single message routed while the person types is not
# held back. Longer than the waits inside a burst (the interpreter, an fsync).
IDLE_S = 0.05


class _Slice(threading.local):
    """One bulk thread's current slice of work."""

    began: float | None = None
    last = 0.0  # its last give_way


class Pace:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._typed_at = float("-inf")
        # Seconds the bulk work has rested for keys since the office started.
        self.rested_s = 0.0
        self._rested = threading.Lock()
        self._slice = _Slice()

    def typed(self) -> None:
        """A key from the person (on the office's loop)."""
        self._typed_at = self._clock()

    def typing(self) -> bool:
        """Whether the person has typed within TYPING_WINDOW_S."""
        return self._clock() - self._typed_at <= TYPING_WINDOW_S

    def give_way(self) -> None:
        """Between two units of a bulk thread's work: rest, if the person types and this
        thread has worked a whole slice since it last rested."""
        now = self._clock()
        here = self._slice
        if now - self._typed_at > TYPING_WINDOW_S:
            here.began = None
            return
        if here.began is None or now - here.last >= IDLE_S:
            here.began = now
        elif now - here.began >= SLICE_S:
            self._sleep(REST_S)
            rested = self._clock()
            with self._rested:
                self.rested_s += rested - now
            now = here.began = rested
        here.last = now


def no_pace() -> None:
    """`give_way` for bulk work nobody types beside (a CLI, a test of the part alone)."""
