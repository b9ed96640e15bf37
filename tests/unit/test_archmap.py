"""docs/architecture.md's package map is the one scripts/archmap.py makes from the
modules' docstrings, so it lists every module there is and says what each says of itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"


def _archmap() -> ModuleType:
    spec = importlib.util.spec_from_file_location("archmap", ROOT / "scripts" / "archmap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["archmap"] = module
    spec.loader.exec_module(module)
    return module


archmap = _archmap()


def test_the_architecture_page_holds_the_map_the_docstrings_make() -> None:
    block = archmap.package_map()
    assert block in PAGE.read_text(encoding="utf-8"), (
        "docs/architecture.md's map is stale: run `python scripts/archmap.py --write "
        "docs/architecture.md`"
    )
    for module in ("hive_core/", "  memory/", "    store.py", "  worktrees/", "    keeper.py"):
        assert any(line.startswith(module) for line in block.splitlines()), module


def _tree(root: Path) -> None:
    for top in archmap.TOPS:
        (root / top).mkdir()
        (root / top / "__init__.py").write_text(f'"""The {top} package. More words."""\n')
    (root / "hive_core" / "sub").mkdir()
    (root / "hive_core" / "sub" / "__init__.py").write_text('"""A sub-package."""\n')
    (root / "hive_core" / "sub" / "thing.py").write_text(
        '"""Does the thing. Then more.\n\nDetails."""\nX = 1\n'
    )


def test_the_map_lists_each_module_with_its_first_sentence(tmp_path: Path) -> None:
    _tree(tmp_path)
    lines = archmap.package_map(tmp_path).splitlines()
    assert lines[0] == archmap.BEGIN and lines[-1] == archmap.END
    assert "  sub/                      A sub-package." in lines
    assert "    thing.py                Does the thing." in lines


def test_a_module_without_a_docstring_stops_the_map_with_a_sentence(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "hive_core" / "sub" / "bare.py").write_text("X = 1\n")
    with pytest.raises(archmap.MissingDocstring, match=r"bare\.py has no docstring"):
        archmap.package_map(tmp_path)


def test_write_replaces_only_the_map_and_refuses_a_page_without_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nno markers here\n")
    assert archmap.main(["--write", str(page)]) == 1
    assert "has no map markers" in capsys.readouterr().err
    assert page.read_text() == "# Title\n\nno markers here\n"
    page.write_text(f"# Title\n\n{archmap.BEGIN}\nold\n{archmap.END}\n\nafter\n")
    assert archmap.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Title\n\n") and text.endswith("\n\nafter\n")
    assert archmap.package_map() in text
