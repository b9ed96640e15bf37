"""The office process, by concern: wiring.py (Office: start-up, the loops, the wake
path), routes.py (the route driver: kicks, watcher, sweep), registry.py (registry.json),
person.py (the person's actions: Person.perform), verbs.py (the `hive` verbs run for
their callers), lock.py (one office per home).

Office loads when first named: `hive-office` starting the office imports daemon.py
without the office's own modules (its loops, git, the watcher), which would hold the
office's process back by as long."""

from typing import TYPE_CHECKING, Any

from hive_core.office.lock import OfficeBusy, office_lock

if TYPE_CHECKING:
    from hive_core.office.wiring import Listeners, Office

__all__ = ["Listeners", "Office", "OfficeBusy", "office_lock"]


def __getattr__(name: str) -> Any:
    if name in ("Listeners", "Office"):
        from hive_core.office import wiring

        return getattr(wiring, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
