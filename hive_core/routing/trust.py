"""The trust layer's injection search: what looks like instructions injected into text
a teammate will read (pure; the router calls it from `plan_route`).

A web-enabled agent (office.toml `web = true`) carries whatever the pages it read
said; its mail is stamped `origin: "web"` by the router and every reader shows it as
material to weigh, never as orders. Separately, any routed text is searched for the
shapes prompt injections take; a hit is flagged to the manager with the excerpt, and
the message is still delivered, marked. Detection is a heuristic: it catches the
common shapes, not a determined author, which is why the marking does not depend on it.
What readers print for the marks is marks.py (kept apart: every mail verb imports it).
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from hive_core.config import PATTERN_FLAGS
from hive_core.text import one_line

_SECRET = (
    r"(?:tokens?|passwords?|passwd|passphrases?|secrets?|api[ _-]?keys?|credentials?"
    r"|private[ _-]keys?|ssh[ _-]keys?|session[ _-]cookies?)"
)
# A cue that stands for "any character outside ASCII" (a regex over a non-ASCII range is
# slow on long text, and most mail is ASCII).
NON_ASCII = "non-ascii"
_SECRET_CUES = ("token", "pass", "secret", "api", "credential", "key", "cookie")
_ASK = r"(?:send|post|paste|enter|submit|upload|share|provide|give|type|put)"

# office.toml `[office] injection_patterns` replaces this list. Each entry is a Python
# regular expression, matched case-insensitively, `^`/`$` at line ends; the text is
# NFKC-folded with zero-width characters removed first, and the same patterns are
# applied to text hidden in Unicode tag characters and to base64 runs that decode to text.
# Each default says what a hit means and, as cues, words one of which a hit must contain
# (lower case): a pattern runs only on text with a cue, which keeps the router's cost
# per message low (most mail has none).
DEFAULT_INJECTION_PATTERNS: dict[str, tuple[str, tuple[str, ...]]] = {
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?"
    r"(?:the\s+|your\s+|my\s+|these\s+)?(?:previous|prior|above|earlier|preceding|original)"
    r"\s+(?:instructions?|prompts?|directions?|rules|guidelines)": (
        "asks to ignore previous instructions",
        ("ignore", "disregard", "forget", "override"),
    ),
    r"\byou\s+are\s+now\s+(?:an?\s|no\s+longer\b|free\b|unrestricted\b|jailbroken\b|DAN\b"
    r"|in\s+\w+\s+mode\b)": ("tells the reader who it is now (role play)", ("now",)),
    r"^\s*(?:#+\s*|\[)?(?:system|developer)(?:\s+(?:prompt|message|override))?\]?\s*:": (
        "poses as a system prompt",
        ("system", "developer"),
    ),
    r"</?\s*(?:system|sys|system[_-]prompt|instructions?)\s*>|<\|im_start\|>|\[/?INST\]|<<SYS>>": (
        "poses as a system prompt (markup)",
        ("<", "inst]"),
    ),
    r"\bnew\s+(?:system\s+)?instructions?\s*:": ("announces new instructions", ("instruction",)),
    r"\b(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:the\s+|an?\s+)?"
    r"(?:system|developer|unrestricted)\b": (
        "tells the reader to act as the system",
        ("system", "developer", "unrestricted"),
    ),
    "[\U000e0000-\U000e007f]": ("hides text in invisible Unicode tag characters", (NON_ASCII,)),
    # Atomic groups (?>...): the nearest match is taken and never backtracked into, so
    # text made of these words costs a bounded amount per word.
    rf"\b{_ASK}\b(?>[^\n]{{0,80}}?\b{_SECRET}\b)(?>[^\n]{{0,80}}?https?://)": (
        "asks for a secret to be sent to a link",
        _SECRET_CUES,
    ),
    rf"https?://(?>\S+)(?>[^\n]{{0,80}}?\b{_ASK}\b)[^\n]{{0,40}}\b{_SECRET}\b": (
        "links to a host and asks for a secret",
        _SECRET_CUES,
    ),
}

# Characters that render as nothing: dropped before matching so that "ig\u200bnore"
# reads as "ignore" (tag characters are kept: a pattern looks for them).
_INVISIBLE = dict.fromkeys(
    [0xAD, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065), 0xFEFF]
)
_TAGS = "[\U000e0000-\U000e007f]+"
# Runs long enough to hide a sentence (standard and URL-safe alphabets; padding splits
# runs and is put back): found by one bytes.translate and a split, far quicker than a
# regex over a long body.
BASE64_RUN_MIN = 24
_NOT_BASE64 = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/_-") else 32 for c in range(256)
)
# Bounds the work one message can ask for: at most this many runs are decoded.
BASE64_RUNS_MAX = 64
EXCERPT_CONTEXT = 80
EXCERPT_MAX = 300


class Finding(NamedTuple):
    what: str  # a phrase: what the text looks like
    excerpt: str  # one line around the match, hidden text made visible


class Rule(NamedTuple):
    pattern: re.Pattern[str]
    what: str
    cues: tuple[str, ...]  # none: always tried


class Detector(NamedTuple):
    """Compiled patterns with what each one means."""

    rules: tuple[Rule, ...]

    @classmethod
    def from_list(cls, patterns: Sequence[str] | None) -> Detector:
        """`None`: the defaults. Raises re.error on a pattern that does not compile
        (office.toml is checked with `config.pattern_problem` first). A pattern of the office's
        own that equals a default keeps the default's meaning and cues."""
        chosen = list(DEFAULT_INJECTION_PATTERNS) if patterns is None else list(patterns)
        rules = []
        for p in chosen:
            what, cues = DEFAULT_INJECTION_PATTERNS.get(
                p, (f"matches the office's pattern {p!r}", ())
            )
            rules.append(Rule(re.compile(p, PATTERN_FLAGS), what, cues))
        return cls(tuple(rules))


def find_injection(text: str, detector: Detector) -> Finding | None:
    """The first place `text` looks like instructions injected for its reader, or None."""
    if not detector.rules:
        return None
    for view, where in _views(text):
        # As the patterns' IGNORECASE sees it: "İ" lowers to "i" plus a combining dot.
        lowered = view.lower().replace("\u0307", "")
        # Rules share cues; each is looked for once per view.
        present = {NON_ASCII: not lowered.isascii()}
        for rule in detector.rules:
            if rule.cues and not any(
                present[cue] if cue in present else present.setdefault(cue, cue in lowered)
                for cue in rule.cues
            ):
                continue
            match = rule.pattern.search(view)
            if match is not None:
                return Finding(what=rule.what + where, excerpt=_excerpt(view, match))
    return None


def _views(text: str) -> Iterator[tuple[str, str]]:
    """The text as a reader's model sees it, then what it hides."""
    plain = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
    yield plain, ""
    if not plain.isascii():
        hidden = " ".join(_reveal(run) for run in re.findall(_TAGS, plain))
        if hidden.strip():
            yield hidden, " (in text hidden in Unicode tag characters)"
    words = plain.encode("utf-8", "surrogatepass").translate(_NOT_BASE64).split()
    runs = [w for w in words if len(w) >= BASE64_RUN_MIN]
    for run in runs[:BASE64_RUNS_MAX]:
        decoded = _decode_base64(run.decode("ascii"))
        if decoded is not None:
            yield decoded, " (in base64 text)"


def _decode_base64(run: str) -> str | None:
    """The text a base64 run stands for, or None if it is not text (a hash, binary)."""
    data = run.rstrip("=")
    data += "=" * (-len(data) % 4)
    alphabet = b"-_" if ("-" in data or "_" in data) else None
    if alphabet and ("+" in data or "/" in data):
        return None
    try:
        raw = base64.b64decode(data, altchars=alphabet, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(c.isprintable() or c in "\n\t" for c in decoded)
    return decoded if printable >= 0.9 * len(decoded) else None


def _reveal(run: str) -> str:
    """Tag characters U+E0020..U+E007E mirror ASCII; others (begin/cancel) show as nothing."""
    return "".join(chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E)


def _excerpt(view: str, match: re.Match[str]) -> str:
    start = max(0, match.start() - EXCERPT_CONTEXT)
    end = min(len(view), match.end() + EXCERPT_CONTEXT)
    shown = re.sub(_TAGS, lambda m: f"[hidden: {_reveal(m.group())}]", view[start:end])
    shown = one_line(shown)
    shown = ("…" if start else "") + shown + ("…" if end < len(view) else "")
    return shown if len(shown) <= EXCERPT_MAX else shown[: EXCERPT_MAX - 1] + "…"
