"""Issue 14, notifications (pure): which agent conditions and items ring, each once, and
the bytes written (BEL, OSC 9 and OSC 777, through tmux's passthrough)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive_core.clients.notify import DESKTOP_BURST, Alert, Seen, agent_alert, news, ring
from hive_core.clients.protocol import agent_view
from hive_core.config import DEFAULT_OFFICE_TOML, ConfigError, load_office
from hive_core.desks.state import AgentState, AgentStates
from hive_core.schema import AgentSpec
from hive_core.status import AgentStatus


def state(**fields: object) -> AgentState:
    states = AgentStates([AgentState(spec=AgentSpec(id="jim", name="Jim"), manager=False)])
    with states.edit("jim") as s:
        for name, value in fields.items():
            setattr(s, name, value)
    return s


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"status": "waiting", "prompt": "Bash: make"}, "jim:waiting"),
        ({"status": "exited", "exit_status": 2}, "jim:exited"),
        ({"status": "exited", "exit_status": 1, "start_failed": "exited at once"}, "jim:exited"),
        (
            {"status": "working", "explained": AgentStatus("stalled", "No output.", "e")},
            "jim:stalled",
        ),
        # Not the person's business: the office stopped it (a signal), it quit normally,
        # it works or idles.
        ({"status": "exited", "exit_status": -15}, None),
        ({"status": "exited", "exit_status": 0}, None),
        ({"status": "working"}, None),
        ({"status": "idle"}, None),
    ],
)
def test_what_makes_an_agent_need_the_person(fields: dict[str, object], key: str | None) -> None:
    alert = agent_alert(agent_view(state(**fields)))
    assert (alert.key if alert else None) == key


def test_each_item_rings_once_never_again() -> None:
    seen, alerts = news(Seen(), {}, [("m1", "jim: Budget?"), ("m2", "pam: Vendor?")])
    assert [a.key for a in alerts] == ["m1", "m2"]
    seen, alerts = news(seen, {}, [("m3", "jim: Also"), ("m1", "jim: Budget?")])
    assert [a.key for a in alerts] == ["m3"]
    # Answered (gone from the list) and listed again later: still never repeated.
    seen, alerts = news(seen, {}, [])
    seen, alerts = news(seen, {}, [("m1", "jim: Budget?")])
    assert alerts == []
    # The inbox not read this time: nothing about items.
    assert news(seen, {}, None)[1] == []


def test_an_agent_condition_rings_when_it_begins() -> None:
    prompt = Alert(key="jim:waiting", text="Jim is waiting for you")
    seen, alerts = news(Seen(), {"jim": prompt})
    assert alerts == [prompt]
    seen, alerts = news(seen, {"jim": prompt, "pam": None})  # the same prompt again
    assert alerts == []
    seen, alerts = news(seen, {"jim": None})  # answered
    seen, alerts = news(seen, {"jim": prompt})  # a new prompt
    assert alerts == [prompt]
    stalled = Alert(key="jim:stalled", text="Jim stalled")
    assert news(seen, {"jim": stalled})[1] == [stalled]


def test_the_bytes_written_for_each_mode() -> None:
    alerts = [Alert(key="m1", text="jim: Budget\x1b]0;x\x07 ok?")]
    assert ring(alerts, "off", tmux=False) == ""
    assert ring([], "desktop", tmux=False) == ""
    assert ring(alerts, "bell", tmux=True) == "\x07"
    plain = ring(alerts, "desktop", tmux=False)
    # The agent's ESC and BEL cannot end the sequence early or start another.
    assert plain == (
        "\x07\x1b]9;hive-office: jim: Budget ]0;x ok?\x07"
        "\x1b]777;notify;hive-office;jim: Budget ]0;x ok?\x07"
    )
    wrapped = ring(alerts, "desktop", tmux=True)
    assert wrapped == (
        "\x07\x1bPtmux;\x1b\x1b]9;hive-office: jim: Budget ]0;x ok?\x07\x1b\\"
        "\x1bPtmux;\x1b\x1b]777;notify;hive-office;jim: Budget ]0;x ok?\x07\x1b\\"
    )


def test_a_burst_is_summed_up_with_one_bell() -> None:
    alerts = [Alert(key=f"m{i}", text=f"item {i}") for i in range(DESKTOP_BURST + 4)]
    out = ring(alerts, "desktop", tmux=False)
    assert out.count("\x1b]9;") == DESKTOP_BURST and out.count("\x07") == 1 + 2 * DESKTOP_BURST
    assert "5 more things need you" in out and "item 0" in out and "item 3" not in out


def office_with(folder: Path, key: str, value: str) -> Path:
    """The default office.toml with `key` set to `value` (its line replaced)."""
    lines = [
        f"{key} = {value}" if line.startswith(f"{key} ") else line
        for line in DEFAULT_OFFICE_TOML.splitlines()
    ]
    (folder / "office.toml").write_text("\n".join(lines) + "\n")
    return folder / "office.toml"


def test_office_toml_says_how_to_ring(tmp_path: Path) -> None:
    defaults = load_office(office_with(tmp_path, "notify", '"desktop"')).office
    assert (defaults.notify, defaults.permission_tell_after_s) == ("desktop", 120)
    assert load_office(office_with(tmp_path, "notify", '"bell"')).office.notify == "bell"
    tell = load_office(office_with(tmp_path, "permission_tell_after_s", "30"))
    assert tell.office.permission_tell_after_s == 30
    with pytest.raises(ConfigError, match="notify"):
        load_office(office_with(tmp_path, "notify", '"loud"'))
    with pytest.raises(ConfigError, match="permission_tell_after_s"):
        load_office(office_with(tmp_path, "permission_tell_after_s", "0"))
