"""Who a process is, and what only the person may do (issue 24): the pure rules of
control.py and strays.py, on process lines a real office cannot easily produce. The
attacks themselves run from real desks in tests/e2e/test_containment.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hive_core.actions import ACTIONS, PersonAction
from hive_core.caller import CallerError, require_person
from hive_core.clients.client_socket import admit
from hive_core.control import Attributed, Here, Peer, attribute, decide_call, decide_whoami
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.strays import Proc, agents_born, below, strays_among
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, AgentSpec, ControlRequest

ME = os.getuid()
OFFICE = Here(pid=100, sid=90)  # the office runs in its person's terminal session 90
JIM_CLI = 200  # jim's CLI: leader of session 200
LEADERS = {JIM_CLI: "jim", 700: "pam"}  # 700: a relayed verb run as pam


def who(*line: tuple[int, int]) -> Attributed:
    """Attribute the first process of `line` (pid, session), nearest first."""
    chain = {line[0][0]: list(line)}
    found = attribute(Peer(line[0][0], ME), ME, LEADERS, chain.__getitem__, OFFICE)
    assert isinstance(found, Attributed), found
    return found


def test_a_desks_process_is_its_while_its_cli_lives() -> None:
    in_session = who((300, JIM_CLI), (JIM_CLI, JIM_CLI), (OFFICE.pid, OFFICE.sid))
    assert in_session == Attributed("jim")
    # `setsid` below the CLI (a subreaper): still below it.
    detached = who((301, 301), (JIM_CLI, JIM_CLI), (OFFICE.pid, OFFICE.sid))
    assert detached == Attributed("jim")
    relayed = who((701, 700), (700, 700), (OFFICE.pid, OFFICE.sid))
    assert relayed == Attributed("pam")


def test_what_a_gone_cli_left_behind_is_a_stray() -> None:
    # `setsid -f`, adopted by the office once the CLI (pid 250, no desk's any more) exited.
    assert who((301, 301), (OFFICE.pid, OFFICE.sid)) == Attributed(None, stray=True)
    # Kept the dead CLI's session: a double fork without setsid.
    assert who((302, 250), (OFFICE.pid, OFFICE.sid)) == Attributed(None, stray=True)
    # Deeper: a stray's own child.
    assert who((303, 301), (301, 301), (OFFICE.pid, OFFICE.sid)).stray


def test_the_office_and_its_own_helpers_are_the_persons_and_outsiders_too() -> None:
    assert who((OFFICE.pid, OFFICE.sid), (50, OFFICE.sid)) == Attributed(None)
    helper = who((400, OFFICE.sid), (OFFICE.pid, OFFICE.sid), (50, OFFICE.sid))
    assert helper == Attributed(None)
    # A helper's child that left the office's session: no agent can be told from it.
    left = who((401, 401), (400, OFFICE.sid), (OFFICE.pid, OFFICE.sid))
    assert left == Attributed(None, stray=True)
    # Not below the office at all: the person's terminal (the documented rule).
    assert who((500, 500), (60, 60)) == Attributed(None)
    # No office to be below (attribute without `here`): as before, the person.
    chain = {301: [(301, 301), (OFFICE.pid, OFFICE.sid)]}
    assert attribute(Peer(301, ME), ME, LEADERS, chain.__getitem__) == Attributed(None)


PERSON, JIM, STRAY = Attributed(None), Attributed("jim"), Attributed(None, stray=True)


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_every_action_that_changes_the_office_is_the_persons_alone(action: PersonAction) -> None:
    name = action.name
    assert decide_call(PERSON, name, name) is None
    if action.reads_only:
        assert decide_call(JIM, name, name) is None and decide_call(STRAY, name, name) is None
        return
    by_jim, by_stray = decide_call(JIM, name, name), decide_call(STRAY, name, name)
    assert by_jim is not None and f"you are jim: `{name}` is the person's" in (by_jim.error or "")
    assert by_stray is not None and "in no agent's session" in (by_stray.error or "")


def test_the_verbs_run_outside_the_office_ask_the_same_rule() -> None:
    for verb in ("stop", "merge", "worktree remove", "hire"):
        assert decide_call(PERSON, "person", verb) is None
        refused = decide_call(JIM, "person", verb)
        assert refused is not None and f"`{verb}` is the person's to do" in (refused.error or "")
        assert decide_call(STRAY, "person", verb) is not None
    # A name the table does not know is the person's too (fails closed).
    assert decide_call(JIM, "unheard-of", "unheard-of") is not None


def agents(running: bool) -> AgentStates:
    states = AgentStates([AgentState(spec=AgentSpec(id="michael", name="Michael"), manager=True)])
    with states.edit("michael") as state:
        state.secret = "s-michael"
        state.pid = 4242 if running else None
    return states


def test_a_secret_proves_nothing_outside_the_desk() -> None:
    claim = ControlRequest(cmd="whoami", agent="michael", secret="s-michael")
    stolen, _ = decide_whoami(None, claim, agents(running=True))
    assert not stolen.ok and "michael is running" in (stolen.error or "")
    forged, _ = decide_whoami(
        None, ControlRequest(cmd="whoami", agent="michael", secret="guess"), agents(True)
    )
    assert not forged.ok and "stale or forged" in (forged.error or "")
    # Its own process, with or without it, is michael.
    assert decide_whoami("michael", claim, agents(True))[0].detail == "michael"
    # A desk whose agent is not running: the person acts for it, logged as such.
    reply, acted_for = decide_whoami(None, claim, agents(running=False))
    assert reply.ok and reply.detail == "michael" and acted_for == "michael"


def test_strays_are_the_foreign_session_children_the_office_does_not_wait_for() -> None:
    table = {
        10: Proc(ppid=OFFICE.pid, sid=OFFICE.sid, zombie=True),  # git: its runner waits
        11: Proc(ppid=OFFICE.pid, sid=11, zombie=True),  # a CLI: PtySession waits
        12: Proc(ppid=OFFICE.pid, sid=12, zombie=True),  # adopted: nobody else waits
        13: Proc(ppid=OFFICE.pid, sid=200, zombie=False),  # adopted from jim's session
    }
    assert strays_among(table, table, OFFICE.sid, own={11}) == {12, 13}


def test_what_an_agent_started_is_followed_below_it() -> None:
    table = {
        JIM_CLI: Proc(OFFICE.pid, JIM_CLI, False),
        301: Proc(JIM_CLI, 301, False),
        302: Proc(301, 302, False),
        400: Proc(OFFICE.pid, OFFICE.sid, False),
    }
    assert below(table, OFFICE.pid) == {JIM_CLI, 301, 302, 400}
    assert agents_born(table, {JIM_CLI}) == {JIM_CLI, 301, 302}
    assert agents_born(table, {999}) == set()  # gone


def test_with_no_office_an_agents_identity_is_not_the_person(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = HivePaths(tmp_path)
    for name in ("HIVE_AGENT_ID", "HIVE_SECRET"):
        monkeypatch.delenv(name, raising=False)
    require_person(paths, "merge")  # the person's terminal
    monkeypatch.setenv("HIVE_AGENT_ID", HUMAN)
    require_person(paths, "merge")
    monkeypatch.setenv("HIVE_AGENT_ID", "jim")
    with pytest.raises(CallerError, match=r"`merge` is the person's to do.*HIVE_AGENT_ID=jim"):
        require_person(paths, "merge")
    monkeypatch.delenv("HIVE_AGENT_ID")
    monkeypatch.setenv("HIVE_SECRET", "s")
    with pytest.raises(CallerError, match="HIVE_SECRET"):
        require_person(paths, "stop")


def test_a_stray_does_not_attach_to_the_office() -> None:
    line = {301: [(301, 301), (OFFICE.pid, OFFICE.sid)], 500: [(500, 500), (60, 60)]}
    why = admit(Peer(301, ME), ME, LEADERS, line.__getitem__, OFFICE)
    assert why is not None and "attaching to the office is the person's" in why
    assert "in no agent's session" in why
    assert admit(Peer(500, ME), ME, LEADERS, line.__getitem__, OFFICE) is None
