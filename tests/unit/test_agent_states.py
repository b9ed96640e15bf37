"""AgentStates is the one owner of what others see of an agent: a change is announced
once per edit, and a write outside an edit is refused."""

from __future__ import annotations

import pytest

from hive_core.desks.state import AgentState, AgentStateError, AgentStates
from hive_core.schema import AgentSpec


def floor() -> tuple[AgentStates, list[tuple[str, str]]]:
    states = AgentStates(
        AgentState(spec=AgentSpec(id=i, name=i.title(), role="engineer"), manager=False)
        for i in ("jim", "pam")
    )
    heard: list[tuple[str, str]] = []
    states.listeners.append(lambda state: heard.append((state.id, state.status)))
    return states, heard


def test_an_edit_is_announced_once_with_everything_it_changed() -> None:
    states, heard = floor()
    with states.edit("jim") as jim:
        jim.status = "working"
        jim.last_tool = "Edit"
        with states.edit("jim"):
            jim.paused = True
    assert heard == [("jim", "working")]
    assert states["jim"].entry().paused and states["jim"].last_tool == "Edit"
    assert list(states) == ["jim", "pam"] and len(states) == 2


def test_a_seen_field_cannot_be_written_outside_an_edit() -> None:
    states, heard = floor()
    with pytest.raises(AgentStateError, match=r"AgentStates\.edit"):
        states["pam"].status = "working"
    assert states["pam"].status == "offline" and heard == []
    # What nobody else sees is the writer's own business.
    states["pam"].typed()
    states["pam"].new_secret()
    assert states["pam"].typed_at is not None and heard == []


def test_an_edit_that_fails_still_announces_what_it_changed() -> None:
    states, heard = floor()
    with pytest.raises(RuntimeError), states.edit("pam") as pam:
        pam.status = "idle"
        raise RuntimeError("the writer failed half-way")
    assert heard == [("pam", "idle")]
