"""Mail that keeps coming is shown a few times a second, not once a frame (issue 25:
keystroke echo while 2,000 messages route): each reload makes the app list the inbox
again, count every inbox and redraw the map while the person types. The first change
after a quiet spell is still shown at once, and the last one always is."""

from __future__ import annotations

import time
from pathlib import Path

from textual.message import Message as TextualMessage

from hive_core.cli import hive
from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.mail import message_names, send
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Draft
from hive_tui.app import HiveApp
from hive_tui.bridge import RELOAD_S, HiveLoaded
from hive_tui.panels.inbox import InboxPanel
from tests.support import shell_roster, until

ROSTER = shell_roster("michael", "jim")
SENT = 40


async def test_mail_that_keeps_coming_is_shown_a_few_times_a_second_and_whole(
    short_tmp: Path,
) -> None:
    paths = HivePaths(short_tmp / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(ROSTER)
    init_office(paths)
    config = load_office(paths.office_toml)
    office = Office(paths, agents=False, program=hive)
    app = HiveApp(office)
    seen: list[TextualMessage] = []
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await until(pilot, lambda: any(isinstance(m, HiveLoaded) for m in seen), "first load")
        await until(pilot, lambda: app.panels_mounted, "the side's panels (after frame 1)")
        before = len(seen)
        started = time.monotonic()
        # One routing pass each (a kick per message), a few frames apart.
        for n in range(SENT):
            to = HUMAN if n % 2 else "michael"
            send(paths, config, "jim", Draft(to=to, subject=f"message {n}"))
            await pilot.pause(0.04)
        inbox = app.query_one(InboxPanel)
        await until(pilot, lambda: len(inbox.rows()) == SENT // 2, "the person's mail listed")
        on_disk = len(message_names(paths.mailbox("michael").inbox))
        await until(pilot, lambda: app.unread.get("michael") == on_disk, "michael's count")
        took = time.monotonic() - started
        reloads = [
            m
            for m in seen[before:]
            if isinstance(m, HiveLoaded) and (m.inbox is not None or m.unread)
        ]
        # Once a frame this was about one reload per message.
        assert len(reloads) <= took / RELOAD_S + 2, (len(reloads), took)
