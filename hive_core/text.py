"""Text made safe to show on one line (pure): one rule for every one-line view."""

from __future__ import annotations


def one_line(text: str, limit: int) -> str:
    """`text` as one line of at most `limit` characters: anything unprintable (newlines,
    other line separators, control and format characters) becomes a space, runs of space
    fold into one, and a cut is marked with an ellipsis."""
    if not text.isprintable() or "  " in text:
        text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
