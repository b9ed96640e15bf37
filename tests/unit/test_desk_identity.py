"""A remote desk's own sockets: whose a connection is comes from the socket (pure decisions)."""

from __future__ import annotations

import sys
from pathlib import Path

from hive_core.control import decide_desk
from hive_core.desks.state import AgentState
from hive_core.events.hook_socket import desk_refusal
from hive_core.remote.relay import child_env, exit_code, hive_command
from hive_core.schema import AgentSpec, ControlRequest


def states(**secrets: str) -> dict[str, AgentState]:
    made = {}
    for agent_id, secret in secrets.items():
        state = AgentState(spec=AgentSpec(id=agent_id, name=agent_id, host="box"), manager=False)
        state.secret = secret
        made[agent_id] = state
    return made


AGENTS = states(jim="s-jim", pam="s-pam", kevin="")


def hive(agent: str | None = None, secret: str | None = None) -> ControlRequest:
    return ControlRequest(cmd="hive", agent=agent, secret=secret, argv=["inbox"])


def test_the_desks_own_claim_is_taken_on_its_socket() -> None:
    for req in (hive("jim"), hive("jim", "s-jim"), hive(), hive(None, "s-jim")):
        reply = decide_desk("jim", req, AGENTS)
        assert reply.ok and reply.detail == "jim", req


def test_another_desks_claim_on_its_socket_is_refused() -> None:
    reply = decide_desk("jim", hive("pam", "s-pam"), AGENTS)
    assert not reply.ok and reply.error
    assert "you are jim" in reply.error
    whoami = decide_desk("jim", ControlRequest(cmd="whoami", agent="pam"), AGENTS)
    assert not whoami.ok
    person = decide_desk("jim", hive("human"), AGENTS)
    assert not person.ok and "the person" in (person.error or "")


def test_a_wrong_or_stale_secret_is_refused() -> None:
    reply = decide_desk("jim", hive("jim", "s-pam"), AGENTS)
    assert not reply.ok and "cannot prove it is jim" in (reply.error or "")
    assert not decide_desk("jim", hive(None, "old"), AGENTS).ok


def test_a_desk_never_started_has_nothing_to_relay_for() -> None:
    reply = decide_desk("kevin", hive("kevin"), AGENTS)
    assert not reply.ok and "spawn kevin" in (reply.error or "")
    assert not decide_desk("gone", hive(), AGENTS).ok


def test_other_commands_follow_the_rule_for_the_desks_own_process() -> None:
    # decide_desk lets them on as the desk's; the action rule (reads only) comes after.
    reply = decide_desk("jim", ControlRequest(cmd="status"), AGENTS)
    assert reply.ok and reply.detail == "jim"
    assert decide_desk("jim", ControlRequest(cmd="whoami", agent="jim"), AGENTS).ok


def test_a_hook_frame_for_another_agent_is_refused_on_a_desk_socket() -> None:
    assert desk_refusal("jim", "jim") is None
    assert desk_refusal(None, "pam") is None  # the office's own socket takes any agent
    why = desk_refusal("jim", "pam")
    assert why and "pam" in why and "jim" in why


def test_the_relayed_verb_runs_as_the_desk_in_the_office_home() -> None:
    base = {"PATH": "/bin", "HIVE_REMOTE": "1", "HIVE_CONTROL": "/x", "HIVE_AGENT_ID": "pam"}
    req = ControlRequest(cmd="hive", cwd="/remote/work", tty=[True, False, True])
    env = child_env(base, Path("/office"), "jim", "s-jim", req)
    assert env == {
        "PATH": "/bin",
        "HIVE_HOME": "/office",
        "HIVE_AGENT_ID": "jim",
        "HIVE_SECRET": "s-jim",
        "HIVE_REMOTE_CWD": "/remote/work",
        "HIVE_REMOTE_TTY": "stdin,stderr",
    }
    assert exit_code(2) == 2 and exit_code(-9) == 137
    assert hive_command("/nowhere/python") == ["/nowhere/python", "-P", "-m", "hive_core.cli.hive"]
    assert hive_command(sys.executable)[0].endswith("/hive")
