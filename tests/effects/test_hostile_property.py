"""Random bytes and random nested JSON, as drafts, inbox files and socket frames: the
office refuses or quarantines them with a reason, never raises, and goes on working."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.mail import iter_inbox, write_draft
from hive_core.paths import HivePaths
from hive_core.routing.router import Router
from hive_core.routing.rules import RouteRoster
from hive_core.schema import Draft
from tests.conftest import Running

# JSON values up to a few levels, and a spine that nests far deeper than any decoder's
# default recursion allowance.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def hostile_documents(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "deep", "draft-with-deep-field"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    depth = draw(st.integers(min_value=100, max_value=5000))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    spine = (opener * depth + "1" + closer * depth).encode()
    if kind == "deep":
        return spine
    return b'{"to":"pam","body":"x","x":' + spine + b"}"


@pytest.fixture(scope="module")
def hive() -> Iterator[HivePaths]:
    with tempfile.TemporaryDirectory(prefix="hive-prop-") as root:
        paths = HivePaths(Path(root) / "home")
        init_office(paths)
        yield paths


def _router(paths: HivePaths) -> Router:
    return Router(paths, RouteRoster.from_config(load_office(paths.office_toml)), fsync=False)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=hostile_documents())
def test_any_outbox_file_is_routed_or_quarantined(hive: HivePaths, raw: bytes) -> None:
    router = _router(hive)
    jim = hive.mailbox("jim")
    path = jim.outbox / "hostile.json"
    path.write_bytes(raw)
    os.utime(path, (0, 0))  # old enough: no write grace
    router.scan("jim")
    assert not path.exists(), "the file was handled"
    assert not [n for n in os.listdir(jim.routing) if not n.startswith(".")], "no claim left"
    # The office still routes ordinary mail from the same sender.
    write_draft(jim, Draft(to="pam", subject="still here"))
    router.scan("jim")
    assert any(m.subject == "still here" for m in iter_inbox(hive.mailbox("pam")))
    pam = hive.mailbox("pam")
    for name in os.listdir(pam.inbox):
        if name.endswith(".json"):
            os.rename(pam.inbox / name, pam.done / name)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=hostile_documents())
def test_any_inbox_file_is_skipped_by_readers(hive: HivePaths, raw: bytes) -> None:
    pam = hive.mailbox("pam")
    planted = pam.inbox / "20260101T000000000000-hostile.json"
    planted.write_bytes(raw)
    try:
        write_draft(hive.mailbox("jim"), Draft(to="pam", subject="readable"))
        _router(hive).scan("jim")
        subjects = [m.subject for m in iter_inbox(pam)]
        assert "readable" in subjects
    finally:
        planted.unlink()
        for name in os.listdir(pam.inbox):
            if name.endswith(".json"):
                os.rename(pam.inbox / name, pam.done / name)


def _exchange(path: Path, frame: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(frame + b"\n")
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=hostile_documents())
def test_any_hook_or_control_frame_is_refused_and_the_sockets_go_on(
    running: Running, raw: bytes
) -> None:
    paths = running.office.paths
    raw = raw.replace(b"\n", b" ")
    _exchange(paths.hook_socket, raw)  # no reply, or a refusal: never a dead server
    control_reply = _exchange(paths.control_socket, raw)
    if control_reply:
        assert json.loads(control_reply)["ok"] is False
    # Both sockets still answer a well-formed request.
    jim = running.office.states["jim"]
    frame = {"agent": "jim", "secret": jim.secret, "event": {"hook_event_name": "Stop"}}
    assert json.loads(_exchange(paths.hook_socket, json.dumps(frame).encode()))["exit"] == 0
    status = _exchange(paths.control_socket, b'{"cmd":"status"}')
    assert json.loads(status)["ok"] is True
