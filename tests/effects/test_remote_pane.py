"""A remote desk's terminal is the office's pty running `ssh -tt`: what the person types
reaches the host's program, and a pane resize reaches it as a window change (the
Supervisor alone, a real sshd on 127.0.0.1, a shell desk)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from hive_core.agents.providers import providers
from hive_core.config import load_office
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.supervisor import Supervisor
from hive_core.hive import init_office
from hive_core.paths import HivePaths
from tests.sshd_support import forget_on_host, running_sshd

ROSTER = """[office]
manager = "pam"
remote_venv = "{venv}"

[[agents]]
id = "pam"
name = "Pam"
provider = "shell"
host = "{host}"
ssh_args = {ssh_args}
cwd = "{cwd}"
command = ["bash", "--norc", "--noprofile", "-i"]
"""


async def until(predicate: object, what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_typing_and_a_resize_reach_the_program_on_the_host(short_tmp: Path) -> None:
    with running_sshd(short_tmp / "sshd") as host:
        home = short_tmp / "home"
        home.mkdir()
        (home / "office.toml").write_text(
            ROSTER.format(
                venv=sys.prefix,
                host=host.alias,
                ssh_args=json.dumps(host.ssh_args),
                cwd=short_tmp,
            )
        )
        paths = HivePaths(home)
        init_office(paths)
        config = load_office(paths.office_toml)
        states = AgentStates(AgentState(spec=s, manager=True) for s in config.agents)
        sup = Supervisor(paths, config, states, providers(), log=lambda a, t: None)
        out: list[bytes] = []
        sup.sinks.append(lambda agent, data: out.append(data))
        size = short_tmp / "size.txt"

        def said(text: str) -> bool:
            return text in b"".join(out).decode(errors="replace")

        async def scene() -> None:
            sup.resize(30, 100)
            assert await sup.start("pam")
            await until(lambda: said("bash"), "the remote shell's prompt")
            sup.write("pam", f"stty size > {size}\r".encode())
            await until(lambda: size.exists() and size.read_text().strip(), "stty size")
            assert size.read_text().split() == ["30", "100"]
            size.unlink()
            # The pane grows: ssh passes the window change on to the host's terminal
            # (on its own schedule, so ask until the answer is the new size).
            sup.resize(44, 132, "pam")
            seen: list[list[str]] = []
            for _ in range(50):
                sup.write("pam", f"stty size > {size}\r".encode())
                await until(lambda: size.exists() and size.read_text().strip(), "stty size")
                seen.append(size.read_text().split())
                size.unlink()
                if seen[-1] == ["44", "132"]:
                    break
            assert seen[-1] == ["44", "132"], seen
            await sup.stop_all()
            await until(lambda: states["pam"].status == "exited", "the stop")
            # The office's own stop is no dropped link: nothing to reconnect.
            assert "pam" not in sup.links

        try:
            asyncio.run(scene())
        finally:
            forget_on_host(home)
