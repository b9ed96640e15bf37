"""The person's message from the app (ctrl+] s) is `hive send`, run by the office (issue
25), in the form: an office that does not answer (held up past the thin `hive`'s wait;
here SIGSTOPped) is said in the form with the text kept, nothing sent; once it answers,
the same text sent again arrives once. A real `hive-office serve` behind the app."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from textual.widgets import Input, Label, TextArea

from hive_client import aio
from hive_core.hive import init_office
from hive_core.mail import iter_inbox
from hive_core.paths import HivePaths
from hive_tui.screens.send import SendScreen
from tests.app.conftest import ServeApp, settled
from tests.support import until

PREFIX = "ctrl+right_square_bracket"


async def test_a_message_the_office_did_not_take_stays_in_the_form(
    short_tmp: Path, serve_app: ServeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aio, "ANSWER_TIMEOUT_S", 1.0)
    paths = HivePaths(short_tmp / "home")
    init_office(paths)
    app = serve_app(paths, agents=False)
    pid = int(paths.pid_file.read_text())
    async with app.run_test(size=(160, 48)) as pilot:
        await settled(pilot, app)
        await pilot.press("alt+2", PREFIX, "s")
        await until(pilot, lambda: isinstance(app.screen, SendScreen), "the send form")
        form = app.screen
        await pilot.press(*"Ship it", "tab", *"The release is approved.")
        os.kill(pid, signal.SIGSTOP)
        try:
            await pilot.press("ctrl+s")
            error = form.query_one("#error", Label)
            await until(pilot, lambda: "Not sent" in str(error.render()), "said in the form")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert "not answering" in str(error.render()), error.render()
        assert app.screen is form
        assert form.query_one("#subject", Input).value == "Ship it"
        assert form.query_one("#body", TextArea).text == "The release is approved."
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is not form, "the form closed once sent")
        box = paths.mailbox("jim")
        [message] = await until(pilot, lambda: list(iter_inbox(box)), "delivery to jim")
        assert (message.sender, message.subject) == ("human", "Ship it")
        assert message.body == "The release is approved."
        # The held send was never run: one message, and nothing else on its way.
        assert len(list(iter_inbox(box))) == 1
        assert not list(paths.mailbox("human").outbox.glob("*.json"))
