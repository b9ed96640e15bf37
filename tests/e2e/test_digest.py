"""The manager's floor digest: counts per pair match the traffic, answered requests leave
it, bodies never appear, only the manager gets it, and the wake path never nudges for
it. A real `hive-office serve` (the person acting for desks whose agents are not
running) and the pure parts (fold, compose, decide_wake)."""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hive_core.mail import iter_inbox
from hive_core.schema import MailItem, Message
from hive_core.team.digest import DigestMemory, Routed, compose, digest_notice, fold
from hive_core.team.wake import WakeMemory, WakeView, decide_wake
from tests.serve_support import ServedOffice
from tests.support import wait_for

BIN = Path(sys.executable).parent
PAIR = re.compile(r"^- ([a-z][a-z0-9-]*) -> ([a-z][a-z0-9-]*): (\d+)$", re.M)
OPEN_AFTER_S = 8


def roster(every_s: float, *, watch: str = "digest") -> str:
    text = (
        f'[office]\nmanager = "michael"\nmanager_watch = "{watch}"\n'
        f"manager_digest_every_s = {every_s}\nmanager_digest_open_after_s = {OPEN_AFTER_S}\n"
    )
    for agent in ("michael", "jim", "pam", "dwight"):
        text += f'\n[[agents]]\nid = "{agent}"\nname = "{agent.title()}"\nprovider = "shell"\n'
    return text


class Serve(ServedOffice):
    def __init__(self, root: Path, toml: str) -> None:
        super().__init__(root / "home", roster=toml, agents=False)
        self.start()

    def hive(self, agent: str | None, *args: str) -> str:
        done = self.run("hive", *args, agent=agent)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def inbox(self, agent: str) -> list[Message]:
        return list(iter_inbox(self.paths.mailbox(agent)))

    def digests(self) -> list[Message]:
        return [m for m in self.inbox("michael") if m.subject == "Floor digest"]


def counted(digests: list[Message]) -> Counter[tuple[str, str]]:
    total: Counter[tuple[str, str]] = Counter()
    for d in digests:
        for sender, recipient, n in PAIR.findall(d.body):
            total[(sender, recipient)] += int(n)
    return total


def test_the_digest_counts_the_floor_and_lists_what_waits_for_an_answer(short_tmp: Path) -> None:
    office = Serve(short_tmp, roster(1))
    try:
        office.hive("jim", "send", "--to", "pam", "--act", "request", "--subject", "Review A",
                    "--body", "SECRET-BODY-A")  # fmt: skip
        [review_a] = wait_for(lambda: office.inbox("pam"), "Review A delivered")
        office.hive("pam", "reply", review_a.id, "--body", "SECRET-BODY-reply")
        office.hive("jim", "send", "--to", "pam", "--act", "request", "--subject", "Review B",
                    "--body", "SECRET-BODY-B")  # fmt: skip
        office.hive("pam", "send", "--to", "dwight", "--act", "query", "--subject", "Which DB?",
                    "--body", "SECRET-BODY-Q")  # fmt: skip
        for n in range(2):
            office.hive("dwight", "send", "--to", "jim", "--subject", f"fyi {n}", "--body", "x")
        # Not the floor's: the person's mail and mail to or from the manager.
        office.hive(None, "send", "--to", "jim", "--subject", "from the person", "--body", "x")
        office.hive("jim", "send", "--to", "michael", "--subject", "to the boss", "--body", "x")
        expected = {
            ("jim", "pam"): 2,
            ("pam", "jim"): 1,
            ("pam", "dwight"): 1,
            ("dwight", "jim"): 2,
        }
        wait_for(lambda: counted(office.digests()) == expected, "digests that add up")
        # Open past the threshold: Review B and the question, never the answered one.
        overdue = wait_for(
            lambda: [d for d in office.digests() if "Which DB?" in d.body], "the overdue list"
        )
        assert "Review B" in overdue[0].body and "Requests with no answer" in overdue[0].body
        assert "Questions with no answer" in overdue[0].body
        digests = office.digests()
        assert counted(digests) == expected
        assert all("Review A" not in d.body for d in digests)
        assert all("SECRET-BODY" not in d.body for d in digests)
        assert all(d.sender == "router" and d.id.endswith("-digest") for d in digests)
        # Only the manager got it: everyone else holds exactly what was sent to them.
        assert sorted(m.subject for m in office.inbox("pam")) == ["Review A", "Review B"]
        assert sorted(m.subject for m in office.inbox("dwight")) == ["Which DB?"]
        assert sorted(m.subject for m in office.inbox("jim")) == sorted(
            ["Re: Review A", "fyi 0", "fyi 1", "from the person"]
        )
        # With nothing new, no more digests come (one listed overdue item is not news).
        settled = len(office.digests())
        window = time.monotonic() + 3  # three intervals
        while time.monotonic() < window:
            assert len(office.digests()) == settled
            time.sleep(0.1)
    finally:
        assert office.stop() == 0


def test_manager_watch_off_sends_no_digest(short_tmp: Path) -> None:
    office = Serve(short_tmp, roster(0.5, watch="off"))
    try:
        office.hive("jim", "send", "--to", "pam", "--subject", "hello", "--body", "x")
        wait_for(lambda: office.inbox("pam"), "delivery")
        # The same office with the watch on would have sent one within a second (above).
        window = time.monotonic() + 2
        while time.monotonic() < window:
            assert office.digests() == []
            time.sleep(0.1)
    finally:
        assert office.stop() == 0


T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
PEERS = frozenset({"jim", "pam", "dwight"})


def routed(mid: str, sender: str, to: str, act: str = "inform", conv: str | None = None,
           at: float = 0) -> Routed:  # fmt: skip
    return Routed(
        id=mid,
        at=T0 + timedelta(seconds=at),
        sender=sender,
        recipients=(to,),
        act=act,
        subject=mid,
        conversation=conv or mid,
    )


def test_fold_and_compose_say_news_once() -> None:
    watch = fold(
        DigestMemory(),
        [
            routed("r1", "jim", "pam", "request"),
            routed("a1", "pam", "jim", conv="r1", at=5),
            routed("r2", "jim", "pam", "request", at=10),
            routed("m1", "michael", "jim", "request", at=11),
            routed("h1", "human", "jim", at=12),
        ],
        PEERS,
    )
    assert watch.counts == {("jim", "pam"): 2, ("pam", "jim"): 1}
    assert set(watch.waiting) == {"r2"}
    text, watch = compose(watch, T0 + timedelta(seconds=20), 60)
    assert text is not None and "r2" not in text  # not yet overdue
    assert compose(watch, T0 + timedelta(seconds=30), 60)[0] is None  # nothing new
    text, watch = compose(watch, T0 + timedelta(seconds=80), 60)
    assert text is not None and "- r2 jim -> pam (request, 1 min): r2" in text
    assert compose(watch, T0 + timedelta(seconds=200), 60)[0] is None  # listed once
    # Someone else writing in the thread is no answer; the one asked is.
    watch = fold(watch, [routed("x", "dwight", "jim", conv="r2")], PEERS)
    assert set(watch.waiting) == {"r2"}
    watch = fold(watch, [routed("y", "pam", "jim", conv="r2")], PEERS)
    assert watch.waiting == {}


def test_the_wake_path_never_nudges_for_a_digest() -> None:
    digest = digest_notice("michael", "Floor traffic since the last digest: 1 message.")
    item = MailItem(id=digest.id, sender="router", act="inform", subject=digest.subject)
    idle = WakeView(id="michael", status="idle", quiet_for=60.0, manager=True, unread=(item,))
    quiet = decide_wake(idle, WakeMemory(), 100.0)
    assert quiet.nudge is None and quiet.hold is None
    # Mail that is not a digest still wakes it, and the digest rides along.
    other = MailItem(id="20261201T080000000Z-abcd", sender="jim", act="request", subject="s")
    woken = decide_wake(
        WakeView(id="michael", status="idle", quiet_for=60.0, unread=(item, other)),
        quiet.memory,
        101.0,
    )
    assert woken.nudge is not None and woken.memory.batch_ids == {other.id}
