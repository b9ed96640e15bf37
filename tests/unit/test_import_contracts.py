"""The layering the code keeps (issue 25): the command line and the app are adapters
over the office's domain, so neither reaches into the other, and memory is used through
its package's API.

- The app (hive_tui) imports nothing of hive_core.cli: a verb's logic lives in its domain
  module (tasks.retry_as, worktrees.run_merge, render's views), which both use. The one
  exception is hive_tui/main.py, the `hive-office` program itself: it is the command
  line (its click group is the core's with the app's own verbs), and the app's modules
  are imported by it, never the other way.
- Remote desks (hive_core/remote) import nothing of hive_core.cli: a desk's verb runs in
  the office, not through the command line's modules.
- Neither imports a private memory module: hive_core.memory's package API (its
  docstring) is what the rest of the program uses; hive_core.memory.<anything> is its
  own.
- The app and the MCP server change nothing in the hive themselves: what the person
  sends, retries, merges, forgets or edits is a `hive` verb the office runs
  (hive_tui/verbs.py, link.hive), and what an MCP tool writes is the `hive` verb run by
  the server (cli/mcp_server.py `_hive`), so no module of hive_tui but main.py, and not
  the MCP server, imports or calls a function that writes those (WRITES: mail's send,
  the ledger's writes, the merge, memory's changes).

- hive_core's packages import one another in one direction only (no package-level
  cycle, issue 27), and its root modules (paths, schema, config, mail, ...) are the
  foundation: they import no package, so a newcomer can read the core bottom-up.

Read from the source's syntax tree (every import, at any depth, including those inside
functions and under TYPE_CHECKING), so a lazy import cannot slip past.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What the program lets itself import, by the package that imports.
CHECKED = ("hive_tui", "hive_core/remote")
FORBIDDEN = ("hive_core.cli",)
PRIVATE_MEMORY = "hive_core.memory."
EXEMPT = {"hive_tui/main.py": ("hive_core.cli",)}
# What changes the hive, by module: the office does it for the app (a verb).
WRITES = {
    "hive_core.mail": {"send", "write_draft", "mark_done"},
    "hive_core.team.tasks": {"retry_as", "save_ledger"},
    "hive_core.worktrees": {"run_merge", "apply_merge", "remove"},
    "hive_core.worktrees.merge": {"run_merge", "apply_merge"},
    "hive_core.memory": {"forget", "edit", "note", "promote", "tidy"},
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module an import statement in `tree` names, relative ones resolved against
    `module`; `from X import a` names X, or X.a when that is a module of this program."""
    names: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.append((node.lineno, base))
            names.extend(
                (node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if _is_module(f"{base}.{alias.name}")
            )
    return names


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for top in CHECKED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            exempt = EXEMPT.get(rel, ())
            module = ".".join(Path(rel).with_suffix("").parts)
            tree = ast.parse(path.read_text(), rel)
            for line, name in _imported(tree, module, path.name == "__init__.py"):
                if any(
                    (name == f or name.startswith(f + ".")) and f not in exempt for f in FORBIDDEN
                ):
                    found.append(f"{rel}:{line} imports {name} (the command line)")
                elif name.startswith(PRIVATE_MEMORY):
                    found.append(
                        f"{rel}:{line} imports {name} (memory's own; use hive_core.memory)"
                    )
    return sorted(set(found))


def test_the_app_and_remote_desks_import_no_command_line_and_no_private_memory_module() -> None:
    assert violations() == []


def writes(root: Path = ROOT) -> list[str]:
    """Each place in hive_tui (but main.py) and the MCP server that imports or calls one
    of WRITES: `from M
    import f`, or `m.f` where `m` is module M imported (`from P import m`, `import M as
    m`)."""
    found = []
    adapters = [*(root / "hive_tui").rglob("*.py"), root / "hive_core/cli/mcp_server.py"]
    for path in sorted(p for p in adapters if p.exists()):
        rel = path.relative_to(root).as_posix()
        if rel == "hive_tui/main.py":
            continue
        aliases: dict[str, str] = {}
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if alias.name in WRITES.get(node.module, ()):
                        found.append(f"{rel}:{node.lineno} imports {node.module}.{alias.name}")
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = alias.name
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = aliases.get(node.value.id)
                if module is not None and node.attr in WRITES.get(module, ()):
                    found.append(f"{rel}:{node.lineno} uses {module}.{node.attr}")
    return sorted(set(found))


def test_the_app_leaves_every_change_of_the_hive_to_the_office() -> None:
    assert writes() == []


def test_the_write_contract_sees_an_import_and_a_call_through_a_module(tmp_path: Path) -> None:
    app = tmp_path / "hive_tui"
    app.mkdir()
    (app / "a.py").write_text(
        "from hive_core.mail import send, message_names\n"
        "from hive_core import mail\n"
        "import hive_core.team.tasks as tasks\n"
        "mail.send(1)\n"
        "mail.load_message(1)\n"
        "tasks.retry_as(1)\n"
    )
    (app / "main.py").write_text("from hive_core.mail import send\n")
    (tmp_path / "hive_core" / "cli").mkdir(parents=True)
    (tmp_path / "hive_core" / "cli" / "mcp_server.py").write_text(
        "from hive_core.memory import note, search\n"
    )
    assert writes(tmp_path) == [
        "hive_core/cli/mcp_server.py:1 imports hive_core.memory.note",
        "hive_tui/a.py:1 imports hive_core.mail.send",
        "hive_tui/a.py:4 uses hive_core.mail.send",
        "hive_tui/a.py:6 uses hive_core.team.tasks.retry_as",
    ]


def test_the_contract_sees_each_kind_of_import_it_forbids(tmp_path: Path) -> None:
    """The walk finds a plain, a from, a relative and a lazy (in-function) import of a
    forbidden module, and lets the public memory API and the exempt file through."""
    app = tmp_path / "hive_tui"
    (app / "panels").mkdir(parents=True)
    (tmp_path / "hive_core" / "remote").mkdir(parents=True)
    (app / "panels" / "a.py").write_text(
        "import hive_core.cli.render\n"
        "from hive_core.memory import open_store, Mode\n"
        "def f():\n"
        "    from hive_core.memory.store import Mode\n"
    )
    (app / "main.py").write_text("from hive_core.cli.office import cli\n")
    (tmp_path / "hive_core" / "remote" / "r.py").write_text(
        "from ..cli import common\nfrom hive_core import memory\nfrom hive_core import cli\n"
    )
    assert violations(tmp_path) == [
        "hive_core/remote/r.py:1 imports hive_core.cli (the command line)",
        "hive_core/remote/r.py:1 imports hive_core.cli.common (the command line)",
        "hive_core/remote/r.py:3 imports hive_core.cli (the command line)",
        "hive_tui/panels/a.py:1 imports hive_core.cli.render (the command line)",
        "hive_tui/panels/a.py:4 imports hive_core.memory.store (memory's own; use hive_core.memory)",
    ]


# --- no package-level import cycle in hive_core -------------------------------------------


def _unit(module: str, root: Path) -> str | None:
    """The layering unit `module` belongs to: hive_core's subpackage (hive_core.memory), or
    hive_core for the root's modules, the foundation; None outside hive_core."""
    parts = module.split(".")
    if parts[0] != "hive_core":
        return None
    if len(parts) > 1 and (root / "hive_core" / parts[1]).is_dir():
        return f"hive_core.{parts[1]}"
    return "hive_core"


def package_imports(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """unit -> {unit it imports: [file:line of each import]}, between different units."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted((root / "hive_core").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        module = ".".join(Path(rel).with_suffix("").parts)
        is_package = path.name == "__init__.py"
        if is_package:
            module = module.rpartition(".")[0]
        unit = _unit(module, root)
        assert unit is not None
        edges = graph.setdefault(unit, {})
        for line, name in _imported(ast.parse(path.read_text(), rel), module, is_package):
            other = _unit(name, root)
            if other is not None and other != unit:
                edges.setdefault(other, []).append(f"{rel}:{line}")
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one unit (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in graph.get(unit, {}):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == unit:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return sorted(found)


def _explained(graph: dict[str, dict[str, list[str]]], group: list[str]) -> str:
    return "\n".join(
        f"  {a} -> {b} ({', '.join(graph[a][b][:3])})"
        for a in group
        for b in sorted(graph.get(a, {}))
        if b in group
    )


def test_hive_core_has_no_package_level_import_cycle() -> None:
    graph = package_imports()
    assert {"hive_core", "hive_core.memory", "hive_core.office", "hive_core.cli"} <= set(graph)
    found = cycles(graph)
    assert not found, "packages that import one another:\n" + "\n\n".join(
        _explained(graph, group) for group in found
    )
    assert graph["hive_core"] == {}, "a root module imports a package: " + str(graph["hive_core"])


def test_the_cycle_check_finds_a_lazy_cycle_and_a_root_module_reaching_up(tmp_path: Path) -> None:
    core = tmp_path / "hive_core"
    for folder in ("a", "b", "c"):
        (core / folder).mkdir(parents=True)
        (core / folder / "__init__.py").write_text("")
    (core / "base.py").write_text("import os\n")
    (core / "a" / "x.py").write_text("from hive_core.b import y\nfrom hive_core import base\n")
    (core / "b" / "y.py").write_text("def f():\n    from hive_core.a.x import g\n")
    (core / "c" / "z.py").write_text("from hive_core.base import thing\n")
    graph = package_imports(tmp_path)
    assert cycles(graph) == [["hive_core.a", "hive_core.b"]]
    assert graph["hive_core"] == {}
    # A root module that imports a package closes a cycle with that package, which uses
    # the root.
    (core / "base.py").write_text("from hive_core.c import z\n")
    graph = package_imports(tmp_path)
    assert cycles(graph) == [["hive_core", "hive_core.c"], ["hive_core.a", "hive_core.b"]]
    assert graph["hive_core"] == {"hive_core.c": ["hive_core/base.py:1"]}
