"""HivePaths is the only module that knows the office's layout: its reverse lookup
(`locate`) names every path its properties build, and no other module of the core
builds or parses a layout path from literals."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hive_core.paths import HivePaths, Mailbox, PlaceKind

CORE = Path(__file__).resolve().parents[2] / "hive_core"
APP = CORE.parent / "hive_tui"
PATHS_PY = CORE / "paths.py"

HOME = Path("/srv/office")

# What each property is. A property missing here fails the test: a new path must say
# what it is to the reverse lookup too.
HOME_KINDS: dict[str, PlaceKind] = {
    "office_toml": "office_toml",
    "hive": "hive",
    "run": "run",
    "pid_file": "run",
    "office_log": "run",
    "unscoped_told": "run",
    "health_file": "run",
    "usage_file": "run",
    "kick_socket": "run",
    "hook_socket": "run",
    "control_socket": "run",
    "client_socket": "run",
    "clients_file": "run",
    "threads": "run",
    "memory_lock": "run",
    "tasks_lock": "run",
    "leases_lock": "run",
    "agent_settings": "agent_settings",
    # An agent's worktree is its working folder, like any folder of its own in the home.
    "worktrees": "home_other",
    "worktree_records": "run",
    "worktree_overlaps": "run",
    "worktree_told": "run",
    "memory_db": "memory_db",
    "ci_logs": "ci_logs",
    "protocol": "protocol",
    "manager_policy": "manager_policy",
    "registry": "registry",
    "board": "board",
    "tasks": "tasks",
    "leases": "leases",
    "log": "log",
    "log_segments": "log_segment",
    "triage": "triage",
    "promoted": "promoted",
    "gitignore": "gitignore",
    "git_dir": "git",
    "agents_dir": "agents",
}
MAILBOX_KINDS: dict[str, PlaceKind] = {
    "identity": "identity",
    "memory": "memory",
    "memory_dir": "memory_dir",
    "notes": "notes",
    "archive": "archive",
    "changes": "changes",
    "notes_lock": "memory_dir",
    "tidy_lock": "memory_dir",
    "inbox": "inbox",
    "done": "done",
    "outbox": "outbox",
    "routing": "routing",
    "sent": "sent",
    "bad": "bad",
    "cursor": "cursor",
}


def properties(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if isinstance(value, property)}


def test_every_property_has_a_kind() -> None:
    assert properties(HivePaths) == set(HOME_KINDS)
    assert properties(Mailbox) == set(MAILBOX_KINDS)


def test_locate_names_every_office_path() -> None:
    paths = HivePaths(HOME)
    for name, kind in HOME_KINDS.items():
        path = getattr(paths, name)
        assert paths.locate(path) == (kind, None), name
        assert paths.locate(path.relative_to(HOME)) == (kind, None), name  # relative
    assert paths.locate(HOME) == ("home", None)
    assert paths.locate(paths.triage / "x.json") == ("triage", None)
    assert paths.locate(paths.log_segments / "0001.jsonl") == ("log_segment", None)
    assert paths.locate(paths.run / "anything") == ("run", None)
    assert paths.locate(HOME / "project") == ("home_other", None)
    assert paths.locate(paths.hive / "notes.txt") == ("hive_other", None)
    for made in (paths.settings_file("jim"), paths.provider_home("codex", "jim") / "x.toml"):
        assert paths.locate(made) == ("agent_settings", None)


@pytest.mark.parametrize("owner", ["jim", "human"])
def test_locate_names_every_mailbox_path_and_its_owner(owner: str) -> None:
    paths = HivePaths(HOME)
    box = paths.mailbox(owner)
    assert paths.locate(box.root) == ("mailbox", owner)
    for name, kind in MAILBOX_KINDS.items():
        path = getattr(box, name)
        assert paths.locate(path) == (kind, owner), name
        assert paths.locate(path.relative_to(HOME)) == (kind, owner), name
    for folder, kind in ((box.inbox, "inbox"), (box.done, "done"), (box.sent, "sent")):
        assert paths.locate(folder / "20261201T000000Z-x.json") == (kind, owner)
    assert paths.mailbox(owner).message_dirs() == (box.inbox, box.done, box.sent)


def test_locate_normalises_and_stays_in_the_home(tmp_path: Path) -> None:
    paths = HivePaths(HOME)
    jim, pam = paths.mailbox("jim"), paths.mailbox("pam")
    assert paths.locate("hive/agents/jim/../pam/memory.md") == ("memory", "pam")
    assert paths.locate(jim.inbox / ".." / ".." / "pam" / "outbox") == ("outbox", "pam")
    assert paths.locate(f"{jim.root}/./inbox//x.json") == ("inbox", "jim")
    assert paths.locate(str(pam.notes)) == ("notes", "pam")
    for outside in (
        "..",
        "../elsewhere/hive/board.md",
        "hive/../../etc/passwd",
        Path("/"),
        Path("/srv"),
        Path("/srv/office2/hive/board.md"),  # a sibling whose name starts like the home
        Path("/etc/passwd"),
    ):
        assert paths.locate(outside) is None, outside
    # A home given with `..` in it (`--home ../x` made absolute) is the same home.
    (tmp_path / "a").mkdir()
    roundabout = HivePaths(tmp_path / "a" / ".." / "office")
    assert roundabout.locate(tmp_path / "office" / "hive" / "board.md") == ("board", None)
    assert roundabout.locate(roundabout.board) == ("board", None)


# --- no layout literals outside paths.py ------------------------------------------------


def layout_names() -> frozenset[str]:
    """Every name paths.py joins onto a path (`x / "inbox"`): the layout's words."""
    tree = ast.parse(PATHS_PY.read_text())
    return frozenset(
        node.right.value
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Constant)
        and isinstance(node.right.value, str)
    )


# Words of the layout that are also other things elsewhere (a recipient, a program, a
# loop's name, a log category): comparing with them or listing them is not path
# parsing. Building a path from them still is, and is still found.
NOT_ONLY_PATHS = frozenset({"hive", "run", "log", "memory", "triage", "promoted", "threads"})
PATH_BUILDERS = frozenset({"joinpath", "with_name", "Path", "PurePath", "PurePosixPath", "join"})
# Where a path's own parts are read: `parts[0]`, `rel[:2]`, `path.name`, `x.parts`.
PART_ATTRIBUTES = frozenset({"name", "parts"})


def _leading(node: ast.AST) -> str | None:
    """The text a string expression starts with: a literal, or an f-string's first part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _leading(node.values[0])
    return None


def _layout_head(node: ast.AST, names: frozenset[str]) -> str | None:
    """The layout name a string expression starts a path with (`"inbox"`, `"agents/x"`,
    `f"log.jsonl.moved-{n}"`), if any."""
    text = _leading(node)
    if text is None:
        return None
    head = text.split("/")[0]
    if head in names:
        return head
    return next((n for n in names if "." in n and head.startswith(f"{n}.")), None)


def _literals(node: ast.AST) -> list[str] | None:
    """The strings of a literal string, or tuple, list or set of them (nested too)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
        found: list[str] = []
        for elt in node.elts:
            inner = _literals(elt)
            if inner is None:
                return None
            found += inner
        return found
    return None


def _is_part(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) or (
        isinstance(node, ast.Attribute) and node.attr in PART_ATTRIBUTES
    )


# The office's own folders under run/: a file joined onto one elsewhere
# (`paths.worktree_records / "told.json"`) is a layout path paths.py does not know. (A
# mail folder's files are messages named by their id, the routing contract, not layout.)
FOLDERS = frozenset(name for name, kind in HOME_KINDS.items() if kind == "run")


def _extends_the_layout(node: ast.BinOp) -> bool:
    return (
        isinstance(node.left, ast.Attribute)
        and node.left.attr in FOLDERS
        and (isinstance(node.right, ast.JoinedStr) or _leading(node.right) is not None)
    )


def layout_literals(source: str, names: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, layout name, what) for each place `source` builds or parses a layout path
    itself. Place kinds (HivePaths.locate) share some names with folders (`inbox`), so a
    name is taken for path parsing only where it is compared with a part of a path, or
    where it has a dot (a file or dot-folder, never a kind)."""
    strict = names - NOT_ONLY_PATHS
    found: list[tuple[int, str, str]] = []

    def add(node: ast.AST, name: str, what: str) -> None:
        found.append((getattr(node, "lineno", 0), name, what))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if head := _layout_head(node.right, names):
                add(node, head, f"builds a path: {ast.unparse(node)}")
            elif _extends_the_layout(node):
                add(node, node.left.attr, f"adds to the layout: {ast.unparse(node)}")  # type: ignore[attr-defined]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            heads = [h for a in node.args if (h := _layout_head(a, names))]
            if called in PATH_BUILDERS and heads:
                add(node, heads[0], f"builds a path: {ast.unparse(node)}")
        elif isinstance(node, ast.JoinedStr):
            head = _layout_head(node, strict)
            text = _leading(node) or ""
            if head and text.startswith(f"{head}/"):
                add(node, head, f"spells a path: {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and node.attr == "parts":
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "attr", "") == "relative_to":
                add(node, "", f"parses a path: {ast.unparse(node)}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            parts = any(_is_part(side) for side in sides)
            for side in sides:
                words = set(_literals(side) or ()) & strict
                hit = words if parts else {w for w in words if "." in w}
                if hit:
                    add(node, min(hit), f"parses a path: {ast.unparse(node)}")
                    break
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            literals = _literals(node)
            if literals and set(literals) <= strict and any("." in w for w in literals):
                add(node, min(literals), f"lists layout names: {ast.unparse(node)}")
    return sorted(set(found))


# (file, layout name) -> why it may stay.
ALLOWED: dict[tuple[str, str], str] = {
    ("hive_core/committer.py", ".git"): (
        "git's own layout inside any repository the committer writes (ensure_repo, never "
        "staging .git itself), not the office's"
    ),
    ("hive_core/team/leases.py", ".git"): (
        "git's own layout in the person's repositories (which one holds a leased file)"
    ),
    ("hive_core/agents/login.py", ".git"): (
        "git's own layout in a desk's folder: where Claude Code keeps its trust answer"
    ),
    ("hive_core/desks/contain.py", ".git"): (
        "git's own layout in a desk's linked worktree: the repository folders its git "
        "writes, which a contained desk is given"
    ),
    ("hive_core/desks/contain.py", "worktrees"): (
        "git's own .git/worktrees of a desk's repository, which a contained desk's git writes"
    ),
    ("hive_core/agents/gemini.py", "tmp"): (
        "Gemini CLI's own layout in a desk's GEMINI_CLI_HOME (.gemini/tmp holds its chat "
        "records), not the office's run/tmp"
    ),
    ("hive_core/agents/login.py", "worktrees"): (
        "git's own .git/worktrees (a linked worktree's main checkout), not the office's"
    ),
}


def test_no_module_but_paths_py_knows_the_layout() -> None:
    names = layout_names()
    assert {"agents", "inbox", ".done", ".sent", "board.md", "notes.md"} <= names
    problems = []
    for file in sorted([*CORE.rglob("*.py"), *APP.rglob("*.py")]):
        rel = file.relative_to(CORE.parent).as_posix()
        if file == PATHS_PY:
            continue
        for line, name, what in layout_literals(file.read_text(encoding="utf-8"), names):
            if (rel, name) not in ALLOWED:
                problems.append(f"{rel}:{line}: {what}")
    assert not problems, "use HivePaths/Mailbox or HivePaths.locate:\n" + "\n".join(problems)


def test_the_layout_check_finds_what_it_is_for() -> None:
    names = layout_names()
    caught = """
top = rel.parts[0]
a = box.root / "memory" / "notes.md"
b = paths.hive / "agents"
c = hive.joinpath("promoted", x)
d = path.relative_to(hive).parts
if parts[0] == "agents" and rest[1] in ("inbox", ".done"):
    pass
e = (("inbox",), ("outbox", ".sent"))
f = log.with_name(f"log.jsonl.moved-{n}")
g = f"agents/{who}"
h = root / "agents/jim"
i = self.paths.worktree_records / "told.json"
j = paths.threads / f"{agent}.json"
"""
    lines = {line for line, _, _ in layout_literals(caught, names)}
    assert lines == {3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14}, layout_literals(caught, names)
    legitimate = """
if to == "triage" or kind == "promoted" or loop == "memory":
    pass
if place.kind in ("inbox", "outbox") or kind == "outbox":
    pass
verbs = {"inbox": 1}
where = path.relative_to(paths.hive)
problem = ("agents", str(i), "id", "twice")
say(f"queued in your outbox {where}")
"""
    assert layout_literals(legitimate, names) == []
