"""A growing team: a new agent's office.toml entry, checked as office.toml is and
written into the person's file without touching a byte of what is already there.

`plan_hire` is pure (the file's text in, the new text out, or a refusal); `hire_into`
is its one effect. The running office adds the agent itself (office/wiring.py
`Office.add_agent`); with no office running the entry waits for the next start.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Sequence
from pathlib import Path

import msgspec

from hive_core.config import check_office
from hive_core.errors import OfficeError
from hive_core.fsio import atomic_write
from hive_core.schema import (
    AGENT_ID_RULE,
    NAME_MAX,
    PROVIDER_NAMES,
    RESERVED_IDS,
    ROLE_MAX,
    AgentSpec,
    ControlRequest,
    OfficeConfig,
    is_agent_id,
)

PROVIDERS: tuple[str, ...] = PROVIDER_NAMES


class HireRefused(OfficeError):
    """The hire cannot be done; the message is one sentence saying why and what to do.
    office.toml is left as it was."""


def on_the_roster(agent_id: str) -> HireRefused:
    return HireRefused(
        f"{agent_id} is already on the roster; pick another id (`hive-office spawn "
        f"{agent_id}` brings back an archived one)."
    )


def new_spec(
    agent_id: str,
    *,
    name: str,
    role: str,
    provider: str,
    web: bool,
    cwd: str,
    host: str | None = None,
    ssh_args: Sequence[str] = (),
) -> AgentSpec:
    """The entry for a new agent, or HireRefused: the rules office.toml's loader applies
    to one entry (config.check_office), said about this one agent."""
    if not is_agent_id(agent_id):
        raise HireRefused(f"{agent_id!r} is not a valid agent id: use {AGENT_ID_RULE}.")
    if agent_id in RESERVED_IDS:
        raise HireRefused(
            f"{agent_id!r} is reserved ({', '.join(sorted(RESERVED_IDS))}); pick another id."
        )
    if provider not in PROVIDERS:
        raise HireRefused(
            f"{provider!r} is not a provider the office knows: use one of {', '.join(PROVIDERS)}."
        )
    for what, text, limit in (("name", name, NAME_MAX), ("role", role, ROLE_MAX)):
        if what == "name" and not text.strip():
            raise HireRefused("the new agent needs a name (--name).")
        if len(text) > limit or not text.isprintable():
            raise HireRefused(
                f"the {what} must be one line of printable text, at most {limit} characters."
            )
    if host is not None and (not host.strip() or host != host.strip() or host.startswith("-")):
        raise HireRefused(
            f"{host!r} is not a host ssh can be given: no spaces around it, not starting with '-'."
        )
    if ssh_args and host is None:
        raise HireRefused("ssh options are for a desk on another machine: give its host too.")
    entry: dict[str, object] = {
        "id": agent_id, "name": name, "role": role, "provider": provider, "cwd": cwd, "web": web
    }  # fmt: skip
    if host is not None:
        entry.update(host=host, ssh_args=list(ssh_args))
    return msgspec.convert(entry, AgentSpec)


def spec_from_request(req: ControlRequest, here_cwd: str) -> AgentSpec:
    """The hire request's agent, checked (HireRefused). Its cwd: the one asked for, else
    the remote host's home for a desk on another machine, else `here_cwd` (it works
    where the office works)."""
    return new_spec(
        req.agent or "",
        name=req.name,
        role=req.role,
        provider=req.provider,
        web=req.web,
        cwd=req.cwd or ("~" if req.host else here_cwd),
        host=req.host,
        ssh_args=req.ssh_args,
    )


def _toml_string(value: str) -> str:
    # JSON's escapes are all TOML basic-string escapes, and new_spec lets through no
    # character that TOML would need escaped otherwise.
    return json.dumps(value, ensure_ascii=False)


def entry_block(spec: AgentSpec) -> list[str]:
    """The `[[agents]]` lines, in the order and style of the default office.toml."""
    lines = [
        "[[agents]]",
        f"id = {_toml_string(spec.id)}",
        f"name = {_toml_string(spec.name)}",
        f"role = {_toml_string(spec.role)}",
        f"provider = {_toml_string(spec.provider)}",
        f"cwd = {_toml_string(spec.cwd)}",
    ]
    if spec.web:
        lines.append("web = true")
    if spec.host is not None:
        lines.append(f"host = {_toml_string(spec.host)}")
    if spec.ssh_args:
        lines.append(f"ssh_args = [{', '.join(_toml_string(a) for a in spec.ssh_args)}]")
    return lines


def plan_hire(text: str, spec: AgentSpec) -> tuple[str, OfficeConfig]:
    """office.toml's text with `spec` added after the last agent (every other byte
    kept: comments, order, blank lines), and the roster it then holds; HireRefused if
    the file does not load now, already has the id, or would not load after."""
    try:
        before = msgspec.convert(tomllib.loads(text), OfficeConfig)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
        raise HireRefused(f"office.toml does not load ({e}); fix it first.") from None
    if any(a.id == spec.id for a in before.agents):
        raise on_the_roster(spec.id)
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    headers = [i for i, ln in enumerate(lines) if ln.strip() == "[[agents]]"]
    at = len(lines)
    if headers:
        end = next(
            (i for i in range(headers[-1] + 1, len(lines)) if _next_table(lines[i])),
            len(lines),
        )
        # After the block's last setting, so the comments that introduce what follows
        # (a [prices] example) stay with it.
        at = 1 + max(
            i
            for i in range(headers[-1], end)
            if lines[i].strip() and not lines[i].lstrip().startswith("#")
        )
    if at and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += newline
    block = [newline] + [line + newline for line in entry_block(spec)]
    new_text = "".join(lines[:at] + block + lines[at:])
    try:
        after = msgspec.convert(tomllib.loads(new_text), OfficeConfig)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
        raise HireRefused(f"office.toml would not load with {spec.id} added ({e}).") from None
    problems = check_office(after)
    if problems:
        raise HireRefused(problems[0][3])
    if after.agents != [*before.agents, spec] or after.office != before.office:
        # The text did not say what was meant (a layout this does not foresee).
        raise HireRefused(
            f"office.toml is laid out in a way the office cannot add {spec.id} to safely; "
            "add its [[agents]] entry by hand."
        )
    return new_text, after


def _next_table(line: str) -> bool:
    """A header that ends the last agent's entry (`[agents.env]` is still part of it)."""
    stripped = line.lstrip()
    return stripped.startswith("[") and not stripped.startswith("[agents.")


def hire_into(path: Path, spec: AgentSpec) -> OfficeConfig:
    """Write `spec` into office.toml (atomically, its mode kept); the roster after.
    HireRefused leaves the file as it was."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HireRefused(f"{path} cannot be read ({e}); fix it first.") from None
    new_text, after = plan_hire(text, spec)
    try:
        atomic_write(path, new_text.encode(), mode=os.stat(path).st_mode & 0o777)
    except OSError as e:
        raise HireRefused(f"{path} could not be written ({e}); nothing was changed.") from None
    return after
