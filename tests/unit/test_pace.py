"""While the person types, the office's bulk threads rest between slices of their work
(hive_core/pace.py, issue 25: keystroke echo while 2,000 messages route); with no one
typing they never rest."""

from __future__ import annotations

import threading

import pytest

from hive_core.pace import IDLE_S, REST_S, SLICE_S, TYPING_WINDOW_S, Pace


class Clock:
    """Time that moves only when told, and a sleep that moves it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def pace(self) -> Pace:
        return Pace(clock=self, sleep=self.sleep)

    def busy(self, seconds: float) -> None:
        self.now += seconds


def work(pace: Pace, clock: Clock, units: int, unit_s: float) -> None:
    """A bulk thread: `units` pieces of work of `unit_s` each, giving way before each."""
    for _ in range(units):
        pace.give_way()
        clock.busy(unit_s)


def test_no_one_typing_means_no_rest() -> None:
    clock = Clock()
    pace = clock.pace()
    work(pace, clock, units=1_000, unit_s=0.001)
    assert clock.slept == []
    assert pace.rested_s == 0.0
    assert not pace.typing()


def test_while_keys_come_the_work_rests_after_every_slice() -> None:
    clock = Clock()
    pace = clock.pace()
    pace.typed()
    assert pace.typing()
    # Four units make a slice (three do not): the first give_way begins it, and every
    # fourth after that ends it with a rest.
    units = 101
    work(pace, clock, units=units, unit_s=SLICE_S / 3.9)
    assert len(clock.slept) == (units - 1) // 4
    assert set(clock.slept) == {REST_S}
    assert pace.rested_s == pytest.approx(len(clock.slept) * REST_S)


def test_the_work_runs_free_again_once_the_keys_stop() -> None:
    clock = Clock()
    pace = clock.pace()
    pace.typed()
    work(pace, clock, units=20, unit_s=SLICE_S)
    rests_while_typing = len(clock.slept)
    assert rests_while_typing > 0
    clock.now += TYPING_WINDOW_S
    assert not pace.typing()
    work(pace, clock, units=1_000, unit_s=SLICE_S)
    assert len(clock.slept) == rests_while_typing
    # A new key starts a new slice: the first give_way after it does not rest at once.
    pace.typed()
    pace.give_way()
    assert len(clock.slept) == rests_while_typing


def test_each_thread_keeps_its_own_slice() -> None:
    clock = Clock()
    pace = clock.pace()
    pace.typed()
    pace.give_way()  # this thread's slice begins
    clock.busy(SLICE_S * 0.6)

    def other() -> None:
        pace.give_way()  # a slice of its own begins: no rest yet
        clock.busy(SLICE_S * 0.6)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert clock.slept == []
    # Here a whole slice has gone by since this thread's began.
    pace.give_way()
    assert clock.slept == [REST_S]


def test_a_thread_back_from_idle_starts_a_fresh_slice() -> None:
    """A message routed after the route thread sat idle between passes is not held back
    while the person types; a burst's own short waits do not count as idle."""
    clock = Clock()
    pace = clock.pace()
    pace.typed()
    work(pace, clock, units=3, unit_s=SLICE_S / 3.9)  # most of a slice
    clock.now += IDLE_S  # idle until the next pass
    work(pace, clock, units=3, unit_s=SLICE_S / 3.9)  # a fresh slice: no rest
    assert clock.slept == []
    # Waits shorter than IDLE_S between units (an fsync, the interpreter) are the slice's.
    for _ in range(3):
        pace.give_way()
        clock.now += IDLE_S / 2
    assert clock.slept == [REST_S, REST_S]
