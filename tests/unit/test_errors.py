"""Every exception class of hive_core derives from errors.OfficeError: a caller catches the
office's own errors as one kind, and a builtin base says what else one honestly is."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import hive_core
from hive_core.desks.state import AgentStateError
from hive_core.errors import OfficeError
from hive_core.mail import DraftRefused


def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(hive_core.__path__, "hive_core."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_error_of_the_office_derives_from_office_error() -> None:
    found = exception_classes()
    assert "hive_core.team.tasks.LedgerError" in found and len(found) > 40
    strays = sorted(name for name, cls in found.items() if not issubclass(cls, OfficeError))
    assert strays == [], "derive these from hive_core.errors.OfficeError: " + ", ".join(strays)


def test_a_builtin_base_is_kept_where_callers_rely_on_it() -> None:
    # `except ValueError` around a send still catches a refused draft.
    assert issubclass(DraftRefused, ValueError) and issubclass(DraftRefused, OfficeError)
    # A write outside AgentStates.edit is a bug to surface, not an AttributeError that
    # getattr(state, name, default) or hasattr would swallow.
    assert not issubclass(AgentStateError, AttributeError)
    assert issubclass(AgentStateError, RuntimeError)
