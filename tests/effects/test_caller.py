"""Who is calling: the office's answer while it runs, the claim when none does."""

from __future__ import annotations

import pytest

from hive_core.caller import BadClaim, CallerError, identify, proven
from hive_core.config import load_office
from hive_core.office import office_lock
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN
from tests.conftest import Running


def test_a_claim_is_checked_by_the_running_office(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = running.office.paths
    config = load_office(paths.office_toml)
    monkeypatch.setenv("HIVE_AGENT_ID", "jim")
    monkeypatch.setenv("HIVE_SECRET", running.office.states["jim"].secret)
    assert identify(paths, config) == (paths, config, "jim", True)
    monkeypatch.setenv("HIVE_SECRET", running.office.states["pam"].secret)
    with pytest.raises(CallerError, match="cannot prove it is jim"):
        identify(paths, config)
    monkeypatch.setenv("HIVE_AGENT_ID", "")
    with pytest.raises(BadClaim, match="empty"):
        identify(paths, config)
    monkeypatch.setenv("HIVE_AGENT_ID", "toby")
    with pytest.raises(BadClaim, match="not an agent"):
        identify(paths, config)
    monkeypatch.delenv("HIVE_AGENT_ID")
    assert identify(paths, config).who == HUMAN


def test_without_an_office_the_claim_stands_unproven(
    office_home: HivePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_office(office_home.office_toml)
    monkeypatch.setenv("HIVE_AGENT_ID", "pam")
    monkeypatch.setenv("HIVE_SECRET", "anything")
    caller = identify(office_home, config)
    assert (caller.who, caller.proven) == ("pam", False)
    with pytest.raises(CallerError, match="office must be running"):
        proven(caller)
    monkeypatch.delenv("HIVE_AGENT_ID")
    assert proven(identify(office_home, config)).who == HUMAN


def test_an_office_that_does_not_answer_is_a_refusal(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = running.office.paths
    config = load_office(paths.office_toml)
    monkeypatch.setenv("HIVE_AGENT_ID", "pam")
    monkeypatch.setattr(type(paths), "control_socket", property(lambda p: p.run / "gone.sock"))
    # The fixture's office runs in this process without the home's lock; a served one
    # holds it, and that is what tells "no office" from "an office not answering".
    with office_lock(paths), pytest.raises(CallerError, match="not answering"):
        identify(paths, config)
    assert identify(paths, config).proven is False  # no lock, no socket: no office
