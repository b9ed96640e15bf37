"""The office process, by concern: wiring.py (Office: start-up, the loops, the wake
path), routes.py (the route driver: kicks, watcher, sweep), registry.py (registry.json),
person.py (the person's actions: Person.perform), verbs.py (the `hive` verbs run for
their callers), lock.py (one office per home)."""

from hive_core.office.lock import OfficeBusy, office_lock
from hive_core.office.wiring import Listeners, Office

__all__ = ["Listeners", "Office", "OfficeBusy", "office_lock"]
