"""Facts written once (issue 27): the provider names office.toml accepts are
schema.Provider, and the office has exactly one provider for each; the default
office.toml says OfficeSettings' defaults (it is made from them), so a changed default
cannot leave the file that explains it behind."""

from __future__ import annotations

import re
import tomllib

import msgspec

from hive_core.agents.providers import providers
from hive_core.config import DEFAULT_OFFICE_TOML
from hive_core.schema import AGENT_ID_MAX, PROVIDER_NAMES, RESERVED_IDS, OfficeSettings, is_agent_id


def test_one_provider_for_each_name_office_toml_accepts() -> None:
    known = providers()
    assert tuple(known) == PROVIDER_NAMES
    assert all(provider.name == name for name, provider in known.items())


def test_the_default_office_toml_says_the_settings_defaults() -> None:
    office = DEFAULT_OFFICE_TOML.split("[office]\n", 1)[1].split("\n\n", 1)[0]
    defaults = msgspec.structs.asdict(OfficeSettings())
    said: dict[str, object] = {}
    for line in office.splitlines():
        # A line left commented out still states the default (it is what `#` keeps).
        found = re.match(r"#? ?(\w+) = ", line)
        if found and defaults.get(found.group(1)) is not None:
            said |= tomllib.loads(line.lstrip("# "))
    assert len(said) >= 14  # every setting the file mentions that has a value by default
    assert all(said[key] == defaults[key] for key in said), said
    # Providers and reserved ids as the loader knows them.
    assert "# " + " | ".join(PROVIDER_NAMES) in DEFAULT_OFFICE_TOML
    assert ", ".join(sorted(RESERVED_IDS)) in DEFAULT_OFFICE_TOML
    assert f"up to {AGENT_ID_MAX - 1} lowercase" in DEFAULT_OFFICE_TOML
    assert is_agent_id("a" * AGENT_ID_MAX) and not is_agent_id("a" * (AGENT_ID_MAX + 1))
