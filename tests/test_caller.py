"""Who is calling: proven with the agent's secret while the office runs."""

from __future__ import annotations

import pytest

from hive_core.caller import CallerError, authenticated_caller
from hive_core.config import load_office
from hive_core.schema import HUMAN
from tests.conftest import Running


def test_caller_is_proven_by_the_office(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = running.office.paths
    config = load_office(paths.office_toml)
    monkeypatch.setenv("HIVE_AGENT_ID", "jim")
    monkeypatch.setenv("HIVE_SECRET", running.office.states["jim"].secret)
    assert authenticated_caller(paths, config) == "jim"
    monkeypatch.setenv("HIVE_SECRET", running.office.states["pam"].secret)
    with pytest.raises(CallerError, match="cannot prove it is jim"):
        authenticated_caller(paths, config)
    monkeypatch.setenv("HIVE_AGENT_ID", "")
    with pytest.raises(CallerError, match="empty"):
        authenticated_caller(paths, config)
    monkeypatch.setenv("HIVE_AGENT_ID", "toby")
    with pytest.raises(CallerError, match="not an agent"):
        authenticated_caller(paths, config)
    monkeypatch.delenv("HIVE_AGENT_ID")
    assert authenticated_caller(paths, config) == HUMAN


def test_without_an_office_the_claim_stands(office_home, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HIVE_AGENT_ID", "pam")
    monkeypatch.setenv("HIVE_SECRET", "anything")
    assert authenticated_caller(office_home, load_office(office_home.office_toml)) == "pam"
