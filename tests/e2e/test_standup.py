"""One standup per office start (issue 23): a real `hive-office serve` of shell agents
started three times leaves one unread standup, this start's, which says who runs (it is
built once the team's CLIs have started). A standup the manager read, and a file the office
did not write, are never touched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from hive_core.paths import HivePaths
from tests.serve_support import ServedOffice
from tests.support import wait_for

ROSTER = """
[office]
manager = "michael"

[[agents]]
id = "michael"
name = "Michael"
provider = "shell"
command = ["bash", "--norc", "--noprofile", "-i"]

[[agents]]
id = "jim"
name = "Jim"
role = "Engineer"
provider = "shell"
command = ["bash", "--norc", "--noprofile", "-i"]

[[agents]]
id = "pam"
name = "Pam"
provider = "shell"
command = ["no-such-cli-for-pam"]
"""


def unread_standups(paths: HivePaths) -> list[dict[str, Any]]:
    inbox = paths.mailbox("michael").inbox
    return [json.loads(p.read_text()) for p in sorted(inbox.glob("*-standup.json"))]


def start_once(office: ServedOffice) -> dict[str, Any]:
    """Start the office, wait for this start's standup, stop it; the standup."""
    before = {s["id"] for s in unread_standups(office.paths)}
    office.start()
    try:
        fresh = wait_for(
            lambda: [s for s in unread_standups(office.paths) if s["id"] not in before],
            "this start's standup",
        )
    finally:
        assert office.stop() == 0, office.log.read_text()
    [standup] = fresh
    return standup


def test_three_starts_leave_one_unread_standup_that_says_who_runs(tmp_path: Path) -> None:
    office = ServedOffice(tmp_path / "home", roster=ROSTER)
    paths = office.paths

    first = start_once(office)
    # Built after the team started: jim's shell runs; pam's CLI could not start, and why.
    assert "- jim (Jim, Engineer): running" in first["body"]
    assert "- pam (Pam, no role): exited: " in first["body"]
    assert "no-such-cli-for-pam" in first["body"]
    assert "offline" not in first["body"]

    # The manager reads the first one; a file the office did not write looks like one.
    read = office.run("hive", "done", first["id"], agent="michael")
    assert read.returncode == 0, read.stderr
    planted = dict(first, id="20260101T000000000000Z-standup", body="not the office's")
    planted_path = paths.mailbox("michael").inbox / f"{planted['id']}.json"
    planted_path.write_text(json.dumps(planted))

    second = start_once(office)
    third = start_once(office)
    assert [s["id"] for s in unread_standups(paths)] == [planted["id"], third["id"]]
    assert second["id"] != third["id"]
    # The read one is kept where the manager put it; the planted file is as it was.
    assert (paths.mailbox("michael").done / f"{first['id']}.json").exists()
    assert json.loads(planted_path.read_text())["body"] == "not the office's"
    # The replaced one is in the hive's history (the office commits what it removed).
    log = json.loads("[" + ",".join(paths.log.read_text().splitlines()) + "]")
    replaced = [e for e in log if e.get("kind") == "agent" and "replaced" in e.get("detail", "")]
    assert [e["detail"] for e in replaced] == [
        f"unread standup {second['id']} replaced by this start's"
    ]
    history = subprocess.run(
        ["git", "-C", str(paths.hive), "log", "--no-renames", "--name-status", "--format="],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"D\tagents/michael/inbox/{second['id']}.json" in history
