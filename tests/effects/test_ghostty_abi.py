"""pyghostty's declarations come from the user's cache once made; a cached module someone
else could have written is never run, and a home where no cache can be written still
gets a working emulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# A fresh interpreter: the module loads once per process.
PROBE = """
import sys

import pytest
import hive_core.terminal.emulator as emulator
e = emulator.GhosttyEmulator(2, 12)
e.feed("hi \\x1b[1mthere".encode())
print("".join(run.text for run in e.line(0)).rstrip())
print("pyghostty._ffi" in sys.modules)
"""


def probe(cache: Path) -> list[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_the_declarations_are_made_once_then_read_from_the_cache(tmp_path: Path) -> None:
    # The second run reads what the first wrote; neither parses pyghostty's header.
    assert probe(tmp_path) == ["hi there", "False"]
    (made,) = (tmp_path / "hive-office").glob("ghostty_abi_*.py")
    first = made.stat().st_mtime_ns
    assert probe(tmp_path) == ["hi there", "False"]
    assert made.stat().st_mtime_ns == first
    assert [p.name for p in (tmp_path / "hive-office").iterdir() if p.suffix == ".tmp"] == []


def test_an_unwritable_cache_still_gives_an_emulator(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert probe(blocked) == ["hi there", "False"]
    assert blocked.read_text() == "not a folder"


def test_a_cached_module_others_may_write_is_not_run(tmp_path: Path) -> None:
    assert probe(tmp_path) == ["hi there", "False"]
    (made,) = (tmp_path / "hive-office").glob("ghostty_abi_*.py")
    made.write_text("raise SystemExit('ran a file others could write')\n")
    made.chmod(0o666)
    assert probe(tmp_path) == ["hi there", "False"]
    assert made.read_text() == "raise SystemExit('ran a file others could write')\n"
    made.chmod(0o600)  # ours alone again: now it is trusted, and run
    with pytest.raises(subprocess.CalledProcessError, match="returned non-zero"):
        probe(tmp_path)
