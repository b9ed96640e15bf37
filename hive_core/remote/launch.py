"""A remote desk's launch, the effects: the `prepare` ssh call, reading the files the
launch ships, and the main `ssh -tt` argv (the pure parts are in plan.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path

from hive_core.agents.provider import Launch
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.remote.ssh import ssh_argv
from hive_core.schema import AgentSpec

# prepare is a login and three commands; ConnectTimeout (ssh.BASE_OPTIONS) bounds the
# connect, this the rest.
PREPARE_TIMEOUT_S = 60.0


class LinkFailed(Exception):
    """The host could not be reached or prepared; str() is the reason."""


class RemoteHomes:
    """Each host's $HOME, learned by the desk's `prepare` call and kept for the office's
    life (a failure forgets it: the next prepare learns it again)."""

    def __init__(self) -> None:
        self.homes: dict[str, str] = {}

    async def prepare(self, spec: AgentSpec, paths: HivePaths, secret: str) -> str:
        """Run `prepare` for this desk (its private folder, stale sockets gone, the
        start's secret kept there) and return the host's $HOME; raises LinkFailed with
        the reason."""
        assert spec.host is not None
        command = plan.prepare_command(plan.office_key(paths.home), spec.id)
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
            out, err = await asyncio.wait_for(proc.communicate(secret.encode()), PREPARE_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            self.homes.pop(spec.host, None)
            raise LinkFailed(f"preparing {spec.host} took over {PREPARE_TIMEOUT_S:g} s") from None
        home = plan.parse_home(out.decode(errors="replace"))
        if proc.returncode != 0 or home is None:
            self.homes.pop(spec.host, None)
            reason = plan.link_reason(
                err.decode(errors="replace"), f"ssh exited with code {proc.returncode}"
            )
            raise LinkFailed(reason)
        self.homes[spec.host] = home
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
) -> Launch:
    """The local launch the provider made, as `ssh -tt` running it on spec.host. Raises
    plan.ShipError (a sentence) if its files cannot be sent."""
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
    command = plan.remote_command(
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
    return Launch(
        argv=ssh_argv(spec, paths, command, master=True, extra=extra),
        env=local_env,
        cwd=paths.home,
    )


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
