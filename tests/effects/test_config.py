"""office.toml: a bad file is refused with the line and a reason; good ones load."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive_core.config import DEFAULT_OFFICE_TOML, ConfigError, load_office

GOOD = '[office]\nmanager = "michael"\n\n[[agents]]\nid = "michael"\nname = "Michael"\n\n[[agents]]\nid = "jim"\nname = "Jim"\n'


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "office.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_default_roster_loads() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        config = load_office(write(Path(d), DEFAULT_OFFICE_TOML))
    ids = [a.id for a in config.agents]
    assert ids[0] == config.office.manager == "michael" and len(ids) == 4
    assert [a.id for a in config.agents if a.web] == ["pete"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (GOOD.replace('id = "jim"', 'id = "jim'), 9, "Fix the TOML syntax"),
        (GOOD.replace('id = "jim"', 'id = "Jim"'), 9, "not valid"),
        (GOOD.replace('id = "jim"', 'id = "broadcast"'), 9, "reserved"),
        (GOOD.replace('id = "jim"', 'id = "../x"'), 9, "not valid"),
        (GOOD.replace('id = "jim"', 'id = "michael"'), 9, "appears twice"),
        (GOOD.replace('manager = "michael"', 'manager = "toby"'), 2, "no [[agents]] entry"),
        (GOOD + "web = 3\n", 11, "Expected `bool`"),
        (GOOD + 'provider = "emacs"\n', 11, "provider"),
        (GOOD + 'colour = "red"\n', 11, "unknown field `colour`"),
        (GOOD.replace('name = "Jim"\n', ""), 8, "missing required field `name`"),
        ("[office]\nhop_cap = 0\n" + GOOD.split("\n", 2)[2], 2, "hop_cap"),
    ],
    ids=[
        "syntax",
        "uppercase-id",
        "reserved-id",
        "path-id",
        "duplicate-id",
        "no-manager",
        "wrong-type",
        "bad-provider",
        "unknown-field",
        "missing-field",
        "hop-cap",
    ],
)
def test_bad_office_toml_names_line_and_reason(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_office(path)
    message = str(err.value)
    assert str(path) in message and f"line {line}" in message and words in message, message


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hive-office init"):
        load_office(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_office(write(tmp_path, b'[office]\nname = "\xff"\n'))
