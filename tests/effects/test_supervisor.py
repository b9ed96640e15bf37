"""The supervisor against real shells: identity.md at each start, and output to the sinks."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from hive_core.agents.providers import providers
from hive_core.config import load_office
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.supervisor import Supervisor
from hive_core.hive import init_office
from hive_core.paths import HivePaths
from tests.support import until

ROSTER = """\
[office]
manager = "m"

[[agents]]
id = "m"
name = "{name}"
provider = "shell"
cwd = "{cwd}"
command = ["bash", "--norc", "--noprofile", "-c", "{script}"]
"""


def supervisor(
    home: Path, name: str, out: list[bytes], script: str = "echo ready; sleep 300"
) -> Supervisor:
    home.mkdir(exist_ok=True)
    (home / "office.toml").write_text(ROSTER.format(name=name, cwd=home.parent, script=script))
    paths = HivePaths(home)
    init_office(paths)
    config = load_office(paths.office_toml)
    states = AgentStates(AgentState(spec=s, manager=True) for s in config.agents)
    sup = Supervisor(paths, config, states, providers(), log=lambda a, t: None)
    sup.sinks.append(lambda agent, data: out.append(data))
    return sup


def test_identity_is_rewritten_only_when_it_changed(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def start_once(name: str) -> Path:
        out: list[bytes] = []
        sup = supervisor(home, name, out)
        assert await sup.start("m")
        await until(None, lambda: b"ready" in b"".join(out), "the child to say ready")
        await sup.stop_all()
        return sup.paths.mailbox("m").identity

    async def main() -> None:
        identity = await start_once("Mona")
        first = identity.stat()
        assert "Mona" in identity.read_text()
        await start_once("Mona")
        assert identity.stat().st_ino == first.st_ino  # the same file: not written again
        await start_once("Moira")
        assert "Moira" in identity.read_text() and "Mona" not in identity.read_text()

    asyncio.run(asyncio.wait_for(main(), 60))


async def test_a_resize_while_the_cli_starts_is_the_size_its_terminal_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client attaching while the team starts sizes the panes during the spawn's awaits
    (the office's copy of the screen takes the new size at once): the pty must too, or
    the CLI draws for a terminal the person does not see."""
    out: list[bytes] = []
    sup = supervisor(tmp_path / "home", "M", out, "stty size; sleep 300")
    # The spawn is held in its containment plan (on a thread) until the resize is made.
    planning, resized = threading.Event(), threading.Event()
    plan = sup._containment

    def held(*args: Any) -> Any:
        planning.set()
        resized.wait(10)
        return plan(*args)

    monkeypatch.setattr(sup, "_containment", held)
    starting = asyncio.create_task(sup.start("m"))
    await until(None, planning.is_set, "the spawn under way")
    sup.resize(17, 61, "m")
    resized.set()
    assert await starting
    try:
        await until(None, lambda: b"17 61" in b"".join(out), "stty's answer")
    finally:
        await sup.stop_all()
