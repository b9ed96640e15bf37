"""A remote desk's launch, the effects: the ssh calls that learn the host's $HOME and
`prepare` the desk (its launch script on stdin), reading the files the launch ships, and
the main `ssh -tt` argv (the pure parts are in plan.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path

from hive_core.agents.provider import Launch
from hive_core.errors import OfficeError
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.remote.ssh import ssh_argv
from hive_core.schema import AgentSpec

# prepare is a login and a few commands; ConnectTimeout (ssh.BASE_OPTIONS) bounds the
# connect, this the rest.
PREPARE_TIMEOUT_S = 60.0


class LinkFailed(OfficeError):
    """The host could not be reached or prepared; str() is the reason."""


class RemoteHomes:
    """Each host's $HOME, kept for the office's life: learned by one ssh call before the
    first start on a host (a desk's launch names absolute paths there), checked again by
    every `prepare`; a failure forgets it, so the next start learns it again."""

    def __init__(self) -> None:
        self.homes: dict[str, str] = {}

    async def home(self, spec: AgentSpec, paths: HivePaths) -> str:
        """spec.host's $HOME; raises LinkFailed with the reason."""
        assert spec.host is not None
        known = self.homes.get(spec.host)
        if known is None:
            known = await self._call(spec, paths, plan.HOME_COMMAND, b"", "asking")
            self.homes[spec.host] = known
        return known

    async def prepare(self, spec: AgentSpec, paths: HivePaths, home: str, script: str) -> None:
        """Run `prepare` for this desk (its private folder, stale sockets gone) with the
        launch script on its stdin, the one way the start's values reach the host;
        raises LinkFailed with the reason, or if the host's $HOME is no longer `home`
        (the script names paths under it)."""
        assert spec.host is not None
        command = plan.prepare_command(plan.office_key(paths.home), spec.id)
        now = await self._call(spec, paths, command, script.encode(), "preparing")
        if now != home:
            self.homes.pop(spec.host, None)
            raise LinkFailed(f"$HOME on {spec.host} is now {now}, not {home}")

    async def _call(
        self, spec: AgentSpec, paths: HivePaths, command: str, data: bytes, what: str
    ) -> str:
        """Run `command` on the host with `data` on its stdin; the $HOME it prints last."""
        assert spec.host is not None
        argv = ssh_argv(spec, paths, command)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            self.homes.pop(spec.host, None)
            raise LinkFailed(f"ssh cannot be run: {exc}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(data), PREPARE_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            self.homes.pop(spec.host, None)
            raise LinkFailed(f"{what} {spec.host} took over {PREPARE_TIMEOUT_S:g} s") from None
        home = plan.parse_home(out.decode(errors="replace"))
        if proc.returncode != 0 or home is None:
            self.homes.pop(spec.host, None)
            reason = plan.link_reason(
                err.decode(errors="replace"), f"ssh exited with code {proc.returncode}"
            )
            raise LinkFailed(reason)
        return home


def _read_named(named: list[str]) -> dict[str, bytes]:
    """The regular files of these paths under the office home (a folder: the files in
    it), by path. A path that does not exist is left as it is."""
    files: dict[str, bytes] = {}
    for name in named:
        path = Path(name)
        if path.is_file():
            files[name] = path.read_bytes()
        elif path.is_dir():
            for inner in sorted(path.rglob("*")):
                if inner.is_file() and not inner.is_symlink():
                    files[str(inner)] = inner.read_bytes()
    return files


def remote_launch(
    launch: Launch,
    spec: AgentSpec,
    paths: HivePaths,
    *,
    remote_home: str,
    remote_venv: str,
    executable: str,
    office_env: Mapping[str, str],
) -> tuple[Launch, str]:
    """The local launch the provider made, as `ssh -tt` running it on spec.host, and the
    launch script that `RemoteHomes.prepare` must send before it runs. Raises
    plan.ShipError (a sentence) if it cannot be sent."""
    rdir = plan.rdir_of(remote_home, plan.office_key(paths.home), spec.id)
    env = plan.remote_env(launch.env, office_env, rdir, spec.env)
    argv = [executable, *launch.argv[1:]]
    named = plan.named_files([*argv, *env.values()], paths.home)
    shipped = plan.ship_plan(_read_named(named), paths.home, rdir)
    folders = [
        plan.Shipped(n, plan.place_on_host(n, paths.home, rdir), "")
        for n in named
        if Path(n).is_dir()
    ]
    start = plan.remote_start(
        argv,
        env,
        rdir,
        spec.cwd,
        shipped,
        plan.remote_venv_bin(remote_venv, remote_home),
        folders,
    )
    extra = plan.main_extra(
        rdir,
        str(paths.ssh_log(spec.id)),
        str(paths.desk_socket(spec.id, "hook")),
        str(paths.desk_socket(spec.id, "control")),
    )
    # One log per connection: its last line is why this one dropped.
    paths.ssh_log(spec.id).parent.mkdir(parents=True, exist_ok=True)
    paths.ssh_log(spec.id).write_bytes(b"")
    # ssh itself runs here with the office's environment (its agent socket, its config),
    # and the pane's terminal type, which -tt hands to the host's terminal.
    local_env = {k: v for k, v in office_env.items() if not k.startswith("HIVE_")}
    for key in plan.ALWAYS:
        if key in launch.env:
            local_env[key] = launch.env[key]
    local = Launch(
        argv=ssh_argv(spec, paths, start.command, master=True, extra=extra),
        env=local_env,
        cwd=paths.home,
    )
    return local, start.script


def remote_log_reason(paths: HivePaths, agent_id: str, fallback: str) -> str:
    """Why the desk's link dropped, from its ssh -E log (its last meaningful line)."""
    try:
        with open(paths.ssh_log(agent_id), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode(errors="replace")
    except OSError:
        return fallback
    return plan.link_reason(text, fallback)
