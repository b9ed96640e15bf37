"""The client protocol and the server's pure rules: frames round-trip, garbage is a
ProtocolError and nothing else, the pane size rule, who may attach."""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_core.clients.client_socket import admit, pane_sizes, resync_order
from hive_core.clients.protocol import (
    MAX_FRAME,
    PROTOCOL_VERSION,
    Action,
    ActionReply,
    AgentChanged,
    Agents,
    AgentView,
    Bye,
    ClientMessage,
    Detach,
    Exited,
    FrameReader,
    Hello,
    Input,
    Notice,
    OfficeMessage,
    Output,
    ProtocolError,
    Refused,
    Snapshot,
    Typed,
    Visible,
    Welcome,
    client_reader,
    encode,
    office_reader,
    version_refusal,
)
from hive_core.control import Peer
from hive_core.cost import Sum
from hive_core.health import Problem
from hive_core.schema import ControlReply, ControlRequest
from hive_core.status import AgentStatus

VIEW = AgentView(
    id="jim",
    name="Jim",
    role="sales",
    provider="claude",
    manager=False,
    archived=False,
    status="exited",
    exit_status=-9,
    start_failed="exited (code 3) right after it started (0.1 s).",
    prompt="Allow Bash(rm -rf build)?",
    explained=AgentStatus("exited", "It was killed.", "pty: signal 9"),
)

CLIENT: list[ClientMessage] = [
    Hello(version=PROTOCOL_VERSION, pid=42, term_cols=200, term_rows=50),
    Visible(agents=["jim", "pam"], sizes={"jim": (20, 80), "pam": (20, 79)}),
    Input(agent="jim", data=b"\x1b[A\x00\xff"),
    Typed(agent="jim"),
    Action(id=7, req=ControlRequest(cmd="type", agent="jim", text="hi", enter=False)),
    Detach(),
]
OFFICE: list[OfficeMessage] = [
    Welcome(
        version=1, office="Scranton", home="/h", roster=["michael", "jim"], manager="michael", pid=9
    ),
    Refused(why="no."),
    Agents(agents=[VIEW]),
    AgentChanged(view=VIEW),
    Snapshot(agent="jim", rows=24, cols=80, data=b"GHOSTSNP\x00"),
    Output(agent="jim", data=bytes(range(256))),
    Exited(agent="jim", exit=None, signal=9),
    Notice(kind="routed", routes=[("jim", ["pam", "michael"])], inboxes=["pam"]),
    Notice(kind="hive", paths=["/h/hive/board.md"]),
    Notice(kind="health", problems=[Problem(component="commit", detail="x", since="t")]),
    Notice(kind="cost", agent_costs={"jim": Sum(cost=1.5)}, task_costs={"t1": Sum()}),
    ActionReply(id=7, reply=ControlReply(ok=False, error="refused: no.")),
    Bye(why="detached"),
]


def test_every_message_round_trips_one_byte_at_a_time() -> None:
    stream = b"".join(encode(m) for m in CLIENT)
    reader = client_reader()
    assert [m for i in range(len(stream)) for m in reader.feed(stream[i : i + 1])] == CLIENT
    stream = b"".join(encode(m) for m in OFFICE)
    back = office_reader()
    assert [m for i in range(len(stream)) for m in back.feed(stream[i : i + 1])] == OFFICE


def test_a_message_of_the_other_direction_is_not_this_protocol() -> None:
    with pytest.raises(ProtocolError, match="not a message"):
        client_reader().feed(encode(Bye(why="x")))
    assert office_reader().feed(encode(Bye(why="x"))) == [Bye(why="x")]


def test_a_frame_over_the_limit_is_refused_before_it_is_read() -> None:
    reader = client_reader()
    with pytest.raises(ProtocolError, match="limit"):
        reader.feed(struct.pack(">I", MAX_FRAME + 1))
    whole = encode(Input(agent="a", data=b"x" * 1000))
    assert client_reader().feed(whole) == [Input(agent="a", data=b"x" * 1000)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_garbage_never_raises_anything_but_a_protocol_error(chunks: list[bytes]) -> None:
    framed = [struct.pack(">I", len(c)) + c for c in chunks]
    for make in (client_reader, office_reader):
        for stream in (framed, chunks):
            reader: FrameReader[Any] = make()
            with contextlib.suppress(ProtocolError):
                for chunk in stream:
                    reader.feed(chunk)


def test_another_version_is_told_which_versions_differ() -> None:
    assert version_refusal(PROTOCOL_VERSION) is None
    why = version_refusal(PROTOCOL_VERSION + 1)
    assert why is not None
    assert f"version {PROTOCOL_VERSION}" in why and f"version {PROTOCOL_VERSION + 1}" in why


def test_a_pane_takes_the_smallest_size_of_the_clients_that_show_it() -> None:
    one = {"jim": (40, 120), "pam": (20, 100)}
    two = {"jim": (30, 150)}
    assert pane_sizes([one, two], ["jim", "pam", "dwight"]) == {
        "jim": (30, 120),  # rows and cols apart
        "pam": (20, 100),
    }  # dwight is shown by nobody: it keeps its size
    assert pane_sizes([], ["jim"]) == {}


def test_an_attaching_client_gets_the_panes_it_shows_first_then_the_rest_in_order() -> None:
    office = ["michael", "jim", "pam", "dwight"]
    # Before its first Visible: every pane, in the office's order.
    assert resync_order(office, set(office), {}) == office
    # pam shown: hers first; the one already sent (jim) and an unknown agent left out.
    stale = {"michael", "pam", "dwight", "gone"}
    assert resync_order(office, stale, {"pam": (40, 120)}) == ["pam", "michael", "dwight"]
    assert resync_order(office, set(), {"pam": (40, 120)}) == []


def no_chain(pid: int) -> list[tuple[int, int]]:
    return [(pid, pid), (1, 1)]


def test_only_the_offices_own_user_attaches() -> None:
    uid = os.getuid()
    why = admit(Peer(pid=1234, uid=uid + 1), uid, {}, no_chain)
    assert why is not None and f"uid {uid + 1}" in why and f"(uid {uid})" in why
    assert admit(Peer(pid=1234, uid=uid), uid, {}, no_chain) is None


def test_an_agents_process_cannot_attach_as_the_person() -> None:
    uid = os.getuid()

    def inside_jim(pid: int) -> list[tuple[int, int]]:
        return [(pid, 500), (500, 500), (1, 1)]  # its session leader is jim's CLI

    why = admit(Peer(pid=1234, uid=uid), uid, {500: "jim"}, inside_jim)
    assert why is not None and "jim's session" in why
    assert admit(Peer(pid=1234, uid=uid), uid, {600: "pam"}, inside_jim) is None
