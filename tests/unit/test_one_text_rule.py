"""One control-character rule (hive_core/text.py) for every path that prints or stores
an agent's text: each of its functions, and the callers that print through them, keep
and remove the same characters; and no module in hive_core or hive_tui holds a rule of
its own (a new private regex, filter or range fails here until it goes through text.py
or is listed below with the reason it is not about showing text)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from hive_core.clients.notify import desktop
from hive_core.marks import caution
from hive_core.routing.rules import clean_line, clean_text, display_name
from hive_core.schema import MailItem
from hive_core.status import limit_texts
from hive_core.team.wake import nudge_text
from hive_core.text import one_line, shown, stripped

ROOT = Path(__file__).resolve().parents[2]
BIDI_OVERRIDE = "\u202e"
SEQUENCES = ["\x1b[2J", "\x1b]52;c;cm0gLXJm\x07", "\x9b31m", "\x1bP+q\x1b\\", "\x1b(B"]

# Every code point below U+00A0: what a terminal shows as itself is printable ASCII, and
# a body also keeps tab and newline. C1 (U+0080-U+009F) goes like C0: see text.py.
PRINTABLE = {chr(c) for c in range(0x20, 0x7F)}
KEPT_IN_BODY = PRINTABLE | {"\t", "\n"}

BODY: dict[str, Callable[[str], str]] = {
    "shown": shown,
    "stripped": stripped,
    "stripped(sequences)": lambda t: stripped(t, sequences=True),
    "routing clean_text": clean_text,
}
LINE: dict[str, Callable[[str], str]] = {
    "shown(lines=False)": lambda t: shown(t, lines=False),
    "stripped(lines=False)": lambda t: stripped(t, lines=False),
    "stripped(lines=False, by=' ')": lambda t: stripped(t, lines=False, by=" "),
    "one_line": one_line,
    "one_line(limit)": lambda t: one_line(t, 500),
    "routing clean_line": clean_line,
    "routing display_name": display_name,
    "status limit_texts": lambda t: "".join(limit_texts([f"API Error: 429 {t}"])),
    "marks caution": lambda t: caution(None, t) or "",
    "notify desktop": lambda t: desktop(t)[0].removeprefix("\x1b]9;").removesuffix("\x07"),
    "wake nudge": lambda t: nudge_text([MailItem(id="m", sender=t, act="inform", subject="")]),
}


def _kept(function: Callable[[str], str]) -> set[str]:
    """The code points below U+00A0 that come out of `function` as themselves."""
    return {chr(c) for c in range(0xA0) if chr(c) in function(f"a{chr(c)}b").replace("ab", "")}


def test_every_function_keeps_and_removes_the_same_code_points() -> None:
    for name, function in BODY.items():
        assert _kept(function) == KEPT_IN_BODY, name
    for name, function in LINE.items():
        assert _kept(function) == PRINTABLE, name


def test_no_escape_sequence_del_or_bidi_override_comes_through_any_of_them() -> None:
    hostile = f"ok {' '.join(SEQUENCES)} \x7fdel {BIDI_OVERRIDE}gpj.exe end"
    for name, function in {**BODY, **LINE}.items():
        out = function(hostile)
        assert not {"\x1b", "\x9b", "\x07", "\x7f", BIDI_OVERRIDE} & set(out), name
        # What is text stays text: the words either side of every sequence.
        assert "ok" in out and "gpj.exe" in out and "end" in out, name


def test_the_allowed_characters_pass_untouched() -> None:
    # Right-to-left text with its bidi marks, tab and newline in a body.
    text = "\u05e9\u05dc\u05d5\u05dd \u200f(1)\u200e caf\u00e9\tdone\nnext"
    for name, function in BODY.items():
        assert function(text) == text, name
    assert stripped(text, lines=False) == text.replace("\t", "").replace("\n", " ")
    assert clean_line("a\r\n\u2028\u2029\x85b") == "a b"


# --- no rule but text.py's ------------------------------------------------------------

# A control-character rule in source: a check of printability or category, a range of
# code points in a character class, DEL/C1/bidi/line-separator literals, a comparison
# of ord() against a bound, or a compiled pattern that looks for ESC.
PATTERN = re.compile(
    r"""isprintable|unicodedata\.category|["']C[cf]["']"""
    r"|\\x[0-9a-f]{2}-\\x[0-9a-f]{2}"
    r"|\\u20(?:2[a-e]|6[6-9]|28|29)|0x20(?:2[a-e]|6[6-9])"
    r"|\\x(?:7f|[89][0-9a-f])|0x(?:1f|7f|9f)\b"
    r"|ord\([^)]*\)\s*[<>]=?\s*(?:0x[0-9a-f]+|\d+)"
    r"|re\.compile\(.*\\x1b",
    re.IGNORECASE,
)

# What matches and is not a rule for showing text, file by file, each line exactly.
NOT_ABOUT_SHOWING: dict[str, tuple[str, set[str]]] = {
    # Validation: a name, id or office.toml field is refused unless printable (stricter
    # than what may be shown: an identifier holds no format character either).
    "hive_core/config.py": (
        "refuses office.toml text",
        {
            "if len(text) > limit or not text.isprintable():",
            "f\"{'' if text.isprintable() else ' with a line break or control character'}\"",
        },
    ),
    "hive_core/team/hire.py": (
        "refuses a hire's text",
        {"if len(text) > limit or not text.isprintable():"},
    ),
    "hive_core/mail.py": ("refuses a message id", {"and message_id.isprintable()"}),
    "hive_core/routing/rules.py": (
        "refuses an id or conversation",
        {'return 0 < len(value) <= TOKEN_MAX and "/" not in value and value.isprintable()'},
    ),
    # Matching hidden instructions, not showing them (the excerpt goes through one_line).
    "hive_core/routing/trust.py": (
        "finds injections",
        {
            "[0xAD, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F), "
            "*range(0x2060, 0x2065), 0xFEFF]",
            'printable = sum(c.isprintable() or c in "\\n\\t" for c in decoded)',
            'return "".join(chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E)',
        },
    ),
    # Other formats' own escaping: TOML forbids a raw DEL, git C-quotes a path.
    "hive_core/agents/codex.py": (
        "TOML string",
        {'return json.dumps(value, ensure_ascii=False).replace("\\x7f", "\\\\u007f")'},
    ),
    "hive_core/worktrees/plan.py": (
        "git's quoted path",
        {
            "if not any(ord(c) < 0x20 or c in '\"\\\\\\x7f' for c in name):",
            'elif ord(c) < 0x20 or c == "\\x7f":',
        },
    ),
    # Keys the person presses, and escape sequences the office writes or parses.
    "hive_tui/terminal/keys.py": (
        "key encoding",
        {
            '_CTRL_DIGIT = {"2": 0x00, "3": 0x1B, "4": 0x1C, "5": 0x1D, "6": 0x1E, "7": 0x1F, "8": 0x7F}',
            "return chr(ord(upper) & 0x1F)",
            'return "\\x7f"',
            'return "\\x08" if ctrl else "\\x7f"',
            'return ord(character) < 0x20 or character == "\\x7f"',
            "if not (alt or ctrl) and character and character.isprintable():",
        },
    ),
    "hive_tui/terminal/kitty.py": (
        "key encoding",
        {"text = character if character and character.isprintable() else char"},
    ),
    "hive_tui/terminal/copy_mode.py": (
        "keys in copy mode",
        {
            "name = character if character and character.isprintable() else key",
            "if character and character.isprintable():",
        },
    ),
    "hive_tui/terminal/input.py": (
        "parses the keyboard",
        {'_MODIFIED_F3 = re.compile(r"\\x1b\\[1;\\d+R")', "_CSI_FINAL = range(0x40, 0x7F)"},
    ),
    "hive_core/desks/paste.py": (
        "reads a child's mode switches",
        {'_DEC_MODE = re.compile(rb"\\x1b\\[\\?([0-9;]*)([hl])")'},
    ),
}


def _rules_in(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if PATTERN.search(line)]


def test_no_module_but_text_py_holds_a_control_character_rule() -> None:
    found: dict[str, set[str]] = {}
    for package in ("hive_core", "hive_tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name != "hive_core/text.py" and (rules := _rules_in(path.read_text())):
                found[name] = set(rules)
    stray = {
        f"{name}: {line}"
        for name, lines in found.items()
        for line in lines - NOT_ABOUT_SHOWING.get(name, ("", set()))[1]
    }
    assert not stray, "use hive_core/text.py (shown, stripped, one_line) instead"
    # The list names nothing that is gone (a stale entry would excuse a new rule there).
    listed = {f"{name}: {line}" for name, (_, lines) in NOT_ABOUT_SHOWING.items() for line in lines}
    assert listed <= {f"{name}: {line}" for name, lines in found.items() for line in lines}


def test_the_search_finds_each_kind_of_private_rule() -> None:
    planted = [
        'name = "".join(c for c in name if c.isprintable())',
        '_CONTROL = re.compile("[\\x00-\\x1f]")',
        'text = text.replace("\\x9b", "")',
        "if unicodedata.category(c) == 'Cc':",
        "keep = [c for c in text if ord(c) >= 32]",
        '_ANSI = re.compile(r"\\x1b\\[[0-9;]*m")',
        'text = text.replace("\\u202e", "")',
    ]
    for line in planted:
        assert _rules_in(line) == [line], line
    # Writing an escape sequence, or naming ESC, is not a rule.
    assert _rules_in('driver.write(f"{shown}\\x1b[{shape or 0} q")\nESC = "\\x1b"') == []
