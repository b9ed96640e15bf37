"""Route decisions without a disk: properties that hold for any draft and any floor."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from hive_core.ids import new_message_id
from hive_core.routing.decide import Floor, Rejection, RoutePlan, parse_draft, plan_route
from hive_core.schema import ACTS, HUMAN, REPLY_OBLIGING_ACTS, Draft, Message

AGENTS = ["michael", "jim", "pam", "pete", "kevin", "toby"]

floors = st.builds(
    lambda archived, send_only, cap: Floor(
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


def parent_for(sender: str, hops: int) -> Message:
    pid = new_message_id()
    return Message(
        id=pid,
        conversation="conv-1",
        in_reply_to=None,
        sender="jim",
        to=sender,
        act="query",
        subject="q",
        body="b",
        hops=hops,
        created_at="2026-01-01T00:00:00Z",
    )


@given(
    draft=drafts,
    sender=st.sampled_from([*AGENTS[:5], HUMAN]),
    floor=floors,
    parent_hops=st.none() | st.integers(0, 12),
)
def test_route_plan_invariants(
    draft: Draft, sender: str, floor: Floor, parent_hops: int | None
) -> None:
    parent = None
    if parent_hops is not None:
        parent = parent_for(sender, parent_hops)
        draft.in_reply_to = parent.id
    msg_id = new_message_id()
    checked = parse_draft(msgspec.json.encode(draft))
    if isinstance(checked, Rejection):
        assert checked.reason.endswith((".", ")")), "every reason is a sentence"
        return
    plan = plan_route(checked, msg_id=msg_id, sender=sender, parent=parent, floor=floor)
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
