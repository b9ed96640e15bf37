"""office.toml: load, validate, and explain what is wrong with it (with the line)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import msgspec

from hive_core.errors import OfficeError
from hive_core.schema import (
    AGENT_ID_RULE,
    ENV_KEY_RE,
    ENV_LOADER_KEYS,
    ENV_LOADER_PREFIX,
    ENV_OFFICE_PREFIX,
    NAME_MAX,
    PROVIDER_NAMES,
    RESERVED_IDS,
    ROLE_MAX,
    AgentSpec,
    OfficeConfig,
    OfficeSettings,
    is_agent_id,
)


class ConfigError(OfficeError):
    """office.toml cannot be used; the message names the file, the line and the fix."""


# The default office.toml. Each `{field}` is OfficeSettings' default for that setting
# (schema.py holds the values, this file only says them), so the file cannot drift.
_DEFAULT_OFFICE_TEMPLATE = """\
# hive-office roster and settings. Edit freely; `hive-office init` never overwrites this file.
# Agent ids: {id_rule}.
# Reserved ids: {reserved}.

[office]
name = {name}
manager = {manager}      # the manager ("god") agent: runs the floor, the person's proxy
hop_cap = {hop_cap}              # a reply chain longer than this goes to the manager instead
stop_block_cap = {stop_block_cap}       # at most this many Stop blocks in a row to drain mail
prefix_key = {prefix_key}    # the app's prefix key (then ? lists the commands)
alt_digits = {alt_digits}        # alt+1..9 focus agent N; false leaves them to the agent
stall_after_s = {stall_after_s}      # a working agent silent (no hook, no output) this long is stalled
notify = {notify}       # when an agent needs you: desktop (BEL + notification) | bell | off
permission_tell_after_s = {permission_tell_after_s}  # a permission prompt open this long is told to the manager
# injection_patterns = ["..."]  # regexes flagged as injected instructions (replaces the defaults)
# worktree_setup = "cp \"$HIVE_REPO/.env\" ."  # run once in each new agent worktree
# ci_logs_max_age_days = {ci_logs_max_age_days}  # `hive ci-logs`: cached CI runs older than this are deleted
# ci_logs_max_mb = {ci_logs_max_mb}       # ... and the oldest while the cache holds more than this
# manager_watch = {manager_watch}   # the manager's digest of the floor's traffic: digest | off
# manager_digest_every_s = {manager_digest_every_s}        # ... how often (only when there is news)
# manager_digest_open_after_s = {manager_digest_open_after_s}  # ... a request unanswered this long is listed

[[agents]]
id = "michael"
name = "Michael"
role = "Regional manager: runs the floor, plans, delegates, escalates"
provider = "claude"      # {providers}
cwd = "~"

[[agents]]
id = "jim"
name = "Jim"
role = "Engineer"
provider = "claude"
cwd = "~"

[[agents]]
id = "pam"
name = "Pam"
role = "Engineer"
provider = "claude"
cwd = "~"

[[agents]]
id = "pete"
name = "Pete"
role = "Research: looks things up on the web for the team"
provider = "claude"
cwd = "~"
web = true

# The estimated cost uses list prices in USD per million tokens (hive_core/cost/__init__.py);
# override or add a model family here (a key left out keeps the built-in price):
# [prices."claude-sonnet-4"]
# input = 3.0
# output = 15.0
# cache_write = 3.75
# cache_read = 0.30
"""


def _toml_value(value: object) -> str:
    """A default as office.toml writes it: `true`, `"text"`, `300` for 300.0."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


DEFAULT_OFFICE_TOML = _DEFAULT_OFFICE_TEMPLATE.format(
    **{key: _toml_value(value) for key, value in msgspec.structs.asdict(OfficeSettings()).items()},
    id_rule=AGENT_ID_RULE,
    reserved=", ".join(sorted(RESERVED_IDS)),
    providers=" | ".join(PROVIDER_NAMES),
)


# How an office.toml `injection_patterns` entry is read (routing/trust.py compiles them).
PATTERN_FLAGS = re.IGNORECASE | re.MULTILINE


def pattern_problem(pattern: str) -> str | None:
    """Why an office.toml injection pattern cannot be used, or None."""
    try:
        re.compile(pattern, PATTERN_FLAGS)
    except re.error as e:
        return f"injection pattern {pattern!r} is not a regular expression ({e})."
    return None


def load_office(path: Path) -> OfficeConfig:
    """Parse and validate office.toml. Raises ConfigError with the line and the reason."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{path} does not exist. Run `hive-office init` to create a default office."
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}). Save it as UTF-8.") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}. Fix the TOML syntax there.") from None
    try:
        config = msgspec.convert(data, OfficeConfig)
    except msgspec.ValidationError as e:
        match = re.search(r"at `\$\.(\w+)(?:\[(\d+)\])?(?:\.(\w+))?", str(e))
        table, index, key = match.groups() if match else (None, None, None)
        unknown = re.search(r"unknown field `(\w+)`", str(e))
        key = key or (unknown.group(1) if unknown else None)
        line = _line_of(text, table, index, key) if table else None
        raise ConfigError(f"{path}{_at(line)}: {e}.") from None
    for table, index, key, reason in check_office(config):
        raise ConfigError(f"{path}{_at(_line_of(text, table, index, key))}: {reason}")
    return config


ConfigProblem = tuple[str, str | None, str | None, str]  # (table, index, key, reason)


def check_office(config: OfficeConfig) -> list[ConfigProblem]:
    """Rules msgspec types cannot say, each pointing at the table entry it is about."""
    problems: list[ConfigProblem] = []
    seen: set[str] = set()
    for i, spec in enumerate(config.agents):
        if not is_agent_id(spec.id):
            problems.append(
                (
                    "agents",
                    str(i),
                    "id",
                    f"agent id {spec.id!r} is not valid: use {AGENT_ID_RULE}.",
                )
            )
        elif spec.id in RESERVED_IDS:
            problems.append(
                (
                    "agents",
                    str(i),
                    "id",
                    f"agent id {spec.id!r} is reserved "
                    f"({', '.join(sorted(RESERVED_IDS))}); pick another id.",
                )
            )
        elif spec.id in seen:
            problems.append(
                ("agents", str(i), "id", f"agent id {spec.id!r} appears twice; ids must be unique.")
            )
        seen.add(spec.id)
        who = f"agent {spec.id}" if is_agent_id(spec.id) else f"agent #{i + 1}"
        for key, text, limit in (("name", spec.name, NAME_MAX), ("role", spec.role, ROLE_MAX)):
            if len(text) > limit or not text.isprintable():
                problems.append(
                    (
                        "agents",
                        str(i),
                        key,
                        f"{who}'s {key} is {len(text)} characters"
                        f"{'' if text.isprintable() else ' with a line break or control character'}"
                        f": write it as one line of at most {limit} printable characters.",
                    )
                )
        for key, value in spec.env.items():
            if (why := env_problem(who, key, value)) is not None:
                problems.append(("agents", str(i), "env", why))
        if spec.host is not None and (
            not spec.host.strip()
            or spec.host.startswith("-")
            or any(c.isspace() for c in spec.host)
        ):
            # A leading '-' would be read by ssh as an option, not a destination.
            problems.append(
                (
                    "agents",
                    str(i),
                    "host",
                    f"host {spec.host!r} is not an ssh destination: write it as for `ssh` "
                    "(host, user@host or an alias from ~/.ssh/config), options go in ssh_args.",
                )
            )
        if spec.ssh_args and spec.host is None:
            problems.append(
                ("agents", str(i), "ssh_args", "ssh_args is set without host; add host or drop it.")
            )
    settings = config.office
    if settings.hop_cap < 1:
        problems.append(("office", None, "hop_cap", "office.hop_cap must be at least 1."))
    if settings.stop_block_cap < 0:
        problems.append(
            ("office", None, "stop_block_cap", "office.stop_block_cap must be 0 or more.")
        )
    for key in (
        "ci_logs_max_age_days",
        "ci_logs_max_mb",
        "manager_digest_every_s",
        "manager_digest_open_after_s",
    ):
        if not getattr(settings, key) > 0:
            problems.append(("office", None, key, f"office.{key} must be more than 0."))
    if not settings.stall_after_s > 0:
        problems.append(
            ("office", None, "stall_after_s", "office.stall_after_s must be more than 0 seconds.")
        )
    if not settings.permission_tell_after_s > 0:
        problems.append(
            (
                "office",
                None,
                "permission_tell_after_s",
                "office.permission_tell_after_s must be more than 0 seconds.",
            )
        )
    if not settings.worktree_check_s > 0:
        problems.append(
            (
                "office",
                None,
                "worktree_check_s",
                "office.worktree_check_s must be more than 0 seconds.",
            )
        )
    for key in ("memory_retention_days", "memory_retention_mb"):
        value = getattr(settings, key)
        if value is not None and not value > 0:
            problems.append(
                (
                    "office",
                    None,
                    key,
                    f"office.{key} must be more than 0 (leave it out to keep all).",
                )
            )
    if settings.injection_patterns:
        for pattern in settings.injection_patterns:
            if (why := pattern_problem(pattern)) is not None:
                problems.append(("office", None, "injection_patterns", why))
    for family, price in config.prices.items():
        for key, value in msgspec.structs.asdict(price).items():
            if value is not None and not value >= 0:
                problems.append(
                    ("prices", None, None, f'prices."{family}".{key} must be 0 or more (USD).')
                )
    if not config.agents:
        problems.append(
            ("agents", None, None, "no [[agents]] in the roster; add at least the manager.")
        )
    elif settings.manager not in seen:
        problems.append(
            (
                "office",
                None,
                "manager",
                f"office.manager is {settings.manager!r}, but no "
                "[[agents]] entry has that id. Add one or change office.manager.",
            )
        )
    return problems


def env_problem(who: str, key: str, value: str) -> str | None:
    """Why `key = value` may not be in an agent's `env` (schema.py says which and why),
    as the sentence for office.toml; None if it may."""
    shown = ascii(key[:40] + ("..." if len(key) > 40 else ""))
    if not ENV_KEY_RE.match(key):
        return (
            f"{who}'s env key {shown} is not a variable name: use letters, digits and '_', "
            "not starting with a digit."
        )
    if "\0" in value:
        return (
            f"{who}'s env {key} holds a NUL character, which no environment can carry; remove it."
        )
    if key.startswith(ENV_OFFICE_PREFIX):
        return (
            f"{who}'s env sets {key}, which belongs to the office (it gives every desk its "
            f"{ENV_OFFICE_PREFIX} variables itself): remove {key} from that agent's env."
        )
    if key.startswith(ENV_LOADER_PREFIX) or key in ENV_LOADER_KEYS:
        return (
            f"{who}'s env sets {key}, which makes every program started with it load code "
            "before it runs, the office's own checks included: remove it from that agent's "
            "env (a wrapper script as the agent's `command` can set it for the agent alone)."
        )
    return None


def agent(config: OfficeConfig, agent_id: str) -> AgentSpec | None:
    return next((a for a in config.agents if a.id == agent_id), None)


# --- finding the line a validation error is about -------------------------------------


def _at(line: int | None) -> str:
    return f", line {line}" if line else ""


def _line_of(text: str, table: str, index: str | None, key: str | None) -> int | None:
    """The line of `table[index].key` (or the nearest enclosing header) in the TOML text."""
    lines = text.splitlines()
    if index is None:
        start = next((i for i, ln in enumerate(lines) if ln.strip() == f"[{table}]"), None)
    else:
        headers = [i for i, ln in enumerate(lines) if ln.strip() == f"[[{table}]]"]
        start = headers[int(index)] if int(index) < len(headers) else None
    if start is None:
        return None
    if key:
        for i in range(start + 1, len(lines)):
            stripped = lines[i].strip()
            if stripped.startswith("["):
                break
            if re.match(rf"{re.escape(key)}\s*=", stripped):
                return i + 1
    return start + 1
