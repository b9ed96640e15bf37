"""Route decisions without a disk: properties that hold for any draft and any floor."""

from __future__ import annotations

import contextlib
import json
import tempfile
import unicodedata
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from hive_core.ids import new_message_id
from hive_core.mail import BadMessage, load_message
from hive_core.routing.rules import (
    Rejection,
    RoutePlan,
    RouteRoster,
    clean_line,
    clean_text,
    parse_draft,
    plan_route,
)
from hive_core.schema import (
    ACTS,
    HUMAN,
    JSON_DEPTH_MAX,
    REPLY_OBLIGING_ACTS,
    Draft,
    HopRecord,
    json_depth,
)

AGENTS = ["michael", "jim", "pam", "pete", "kevin", "toby"]

floors = st.builds(
    lambda archived, send_only, cap: RouteRoster(
        manager="michael",
        hop_cap=cap,
        receivers=frozenset(AGENTS[:5]) - archived - send_only,
        archived=frozenset(archived),
        send_only=frozenset(send_only),
    ),
    archived=st.frozensets(st.sampled_from(AGENTS[1:5]), max_size=2),
    send_only=st.frozensets(st.sampled_from(AGENTS[1:5]), max_size=1),
    cap=st.integers(1, 10),
)
recipients = st.sampled_from([*AGENTS, "god", "human", "broadcast", "triage", "../x", "Jim"])
drafts = st.builds(
    Draft,
    to=recipients,
    act=st.sampled_from(ACTS),
    subject=st.text(max_size=30),
    body=st.text(min_size=1, max_size=50),
    needs_human=st.booleans(),
)


def parent_for(hops: int) -> HopRecord:
    return HopRecord(id="p", hops=hops, conversation="conv-1", task=None)


@given(
    draft=drafts,
    sender=st.sampled_from([*AGENTS[:5], HUMAN]),
    floor=floors,
    parent_hops=st.none() | st.integers(0, 12),
)
def test_route_plan_invariants(
    draft: Draft, sender: str, floor: RouteRoster, parent_hops: int | None
) -> None:
    parent = None
    if parent_hops is not None:
        parent = parent_for(parent_hops)
        draft.in_reply_to = new_message_id()
    msg_id = new_message_id()
    checked = parse_draft(msgspec.json.encode(draft))
    if isinstance(checked, Rejection):
        assert checked.reason.endswith((".", ")")), "every reason is a sentence"
        return
    plan = plan_route(checked, msg_id=msg_id, sender=sender, parent=parent, roster=floor)
    if isinstance(plan, Rejection):
        assert draft.to == sender or (draft.to == "god" and sender == "michael")
        return
    assert isinstance(plan, RoutePlan)
    msg = plan.message
    # Router-owned fields.
    assert msg.id == msg_id and msg.sender == sender
    assert msg.requires_reply == (msg.act in REPLY_OBLIGING_ACTS)
    assert msg.hops == (parent.hops + 1 if parent else 0)
    if parent:
        assert msg.conversation == parent.conversation
    # The message itself never goes back to its sender, nor to anyone who cannot receive.
    for delivery in plan.deliveries:
        if delivery.message is msg:
            assert delivery.recipient != sender
            assert delivery.recipient in floor.receivers | {HUMAN, floor.manager}
        else:
            assert delivery.message.sender == "router"
            assert delivery.message.id.startswith(msg_id + "-")
    # Past the cap, the target never gets it.
    if msg.hops > floor.hop_cap:
        assert plan.log is not None and plan.log.kind == "loop"
        assert all(d.message is not msg for d in plan.deliveries)
    # The log names exactly who got the message (or the notice standing in for it).
    assert plan.log is not None and plan.log.msg == msg_id
    delivered_msg = [d.recipient for d in plan.deliveries if d.message is msg]
    if plan.log.kind == "route":
        assert plan.log.recipients == delivered_msg


def test_ids_sort_by_time_and_never_repeat() -> None:
    ids = [new_message_id() for _ in range(5000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


# --- bounded decoding and clean text: any input ----------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n\x01é'),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=40,
)


def nesting(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@given(value=json_values)
def test_json_depth_is_exact_for_any_json(value: object) -> None:
    assert json_depth(json.dumps(value).encode()) == nesting(value)


@given(
    depth=st.integers(0, 3000),
    opener=st.sampled_from([b"[", b"{", b'{"a":[']),
    closed=st.booleans(),
    where=st.sampled_from(["field", "top"]),
)
def test_parse_draft_never_raises_on_deep_json(
    depth: int, opener: bytes, closed: bool, where: str
) -> None:
    closer = {b"[": b"]", b"{": b"}", b'{"a":[': b"]}"}[opener]
    deep = opener * depth + (b"0" if opener != b"{" else b"") + (closer * depth if closed else b"")
    raw = b'{"to":"pam","body":"x","x":' + deep + b"}" if where == "field" else deep
    outcome = parse_draft(raw)
    if json_depth(raw) > JSON_DEPTH_MAX:
        assert isinstance(outcome, Rejection) and "nested" in outcome.reason


@given(raw=st.binary(max_size=400) | json_values.map(lambda v: json.dumps(v).encode()))
def test_parse_draft_and_load_message_never_raise_on_any_bytes(raw: bytes) -> None:
    assert isinstance(parse_draft(raw), Draft | Rejection)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.json"
        path.write_bytes(raw)
        with contextlib.suppress(BadMessage):
            load_message(path)


@given(text=st.text())
def test_clean_text_keeps_lines_and_drops_controls(text: str) -> None:
    line, body = clean_line(text), clean_text(text)
    assert not any(c in line for c in "\n\r\v\f\x85\u2028\u2029")
    assert not any(unicodedata.category(c) == "Cc" for c in line)
    assert not any(unicodedata.category(c) == "Cc" and c not in "\n\t" for c in body)
    assert body.count("\n") == text.count("\n") and len(body) <= len(text)
