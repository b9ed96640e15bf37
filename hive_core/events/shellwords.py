"""A reading of a Bash command for the tool policy: its simple commands, their words and
output redirections, text fed to them on stdin, and the directory each one runs in.

Pure and lenient: it never raises, an unterminated quote takes the rest of the text. It
is not a shell. Quotes, backslashes, `;`/`&&`/`||`/`|`/newline lists, `cd`/`pushd`,
redirections (with fd numbers), here-documents and here-strings, `$(...)` and
backquotes (read as plain lists), comments, `sh -c`/`bash -c`/`eval` strings, and the
variables the caller names are understood; globs, aliases, functions, arithmetic and any
other variable are not, so the policy built on this catches mistakes and the plain forms
of a write, not a determined process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

# Longest first: the scanner takes the first that matches.
_REDIRECTIONS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<>", "<&", ">", "<")
_OUTPUT = frozenset({"&>>", "&>", ">>", ">|", "<>", ">&"} | {">"})
_LIST_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")", "`")
# Bash splits words on space, tab and newline only: any other character is a word's.
_PLAIN = re.compile(r"[^ \t\n'\"\\$;&|()<>`#]+")
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# Programs that run the rest of their words as a command.
WRAPPERS = frozenset(
    {"sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice", "ionice"}
    | {"timeout", "xargs", "stdbuf", "setsid", "chronic"}
)
# `sh -c` inside `sh -c` ...: deeper than this is not read.
NESTING_MAX = 4


@dataclass(frozen=True)
class Simple:
    """One simple command as the policy sees it."""

    words: tuple[str, ...]  # quotes removed, known variables expanded
    writes: tuple[str, ...] = ()  # targets of output redirections
    stdin: str = ""  # here-document and here-string text
    cwd: str | None = None  # where it runs (after the `cd`s before it), None if unknown


def program(words: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The program a simple command runs (its base name; `python3.11` is `python`,
    `pip3` is `pip`) and its arguments, past assignments and wrappers such as `sudo`,
    `env`, `timeout 5` or `xargs -0`."""
    rest = list(words)
    while rest:
        head = rest[0]
        if _ASSIGNMENT.match(head):
            rest.pop(0)
            continue
        name = os.path.basename(head)
        if name in WRAPPERS:
            rest.pop(0)
            # The wrapper's own options, durations, priorities and assignments.
            while rest and (
                rest[0].startswith("-") or rest[0][:1].isdigit() or _ASSIGNMENT.match(rest[0])
            ):
                rest.pop(0)
            continue
        return _base_name(name), tuple(rest[1:])
    return "", ()


def _base_name(name: str) -> str:
    match = re.fullmatch(r"(python|pip|perl|ruby|node)[0-9.]*", name)
    return match.group(1) if match else name


def commands(
    text: str, cwd: str | None, variables: Mapping[str, str], _depth: int = 0
) -> list[Simple]:
    """The simple commands of `text`, in order, each with the directory it runs in.

    `variables` are expanded wherever the shell would (unquoted or in double quotes);
    any other `$NAME` stays as written."""
    found: list[Simple] = []
    for words, writes, stdin in _simple_commands(text, variables):
        name, args = program(words)
        if name in ("cd", "pushd"):
            target = next((a for a in args if not a.startswith("-")), "~")
            cwd = _change_dir(cwd, target)
            continue
        found.append(Simple(words, writes, stdin, cwd))
        if _depth >= NESTING_MAX:
            continue
        inner = None
        if name in _SHELLS and "-c" in args[:-1]:
            inner = args[args.index("-c") + 1]
        elif name == "eval":
            inner = " ".join(args)
        elif name in _SHELLS and stdin and not args:
            inner = stdin
        if inner is not None:
            found += commands(inner, cwd, variables, _depth + 1)
    return found


def _change_dir(cwd: str | None, target: str) -> str | None:
    if target == "-":
        return cwd
    target = os.path.expanduser(target)
    if os.path.isabs(target):
        return os.path.normpath(target)
    # Bash's cd is logical: `..` drops a component of the path, not of a link's target.
    return os.path.normpath(os.path.join(cwd, target)) if cwd else None


# --- the scanner ------------------------------------------------------------------------

_Command = tuple[tuple[str, ...], tuple[str, ...], str]


def _simple_commands(text: str, variables: Mapping[str, str]) -> list[_Command]:
    # Each command keeps its own stdin list: a here-document's body is read after the
    # command has ended (at the next newline).
    done: list[tuple[tuple[str, ...], tuple[str, ...], list[str]]] = []
    words: list[str] = []
    writes: list[str] = []
    stdin: list[str] = []
    # Here-documents whose bodies start after the next newline: (delimiter, strip tabs,
    # the stdin list of the command they feed).
    pending: list[tuple[str, bool, list[str]]] = []
    redirection: str | None = None  # the operator waiting for its word

    def finish() -> None:
        nonlocal words, writes, stdin, redirection
        if words or writes:
            done.append((tuple(words), tuple(writes), stdin))
        words, writes, stdin, redirection = [], [], [], None

    def take(word: str) -> None:
        nonlocal redirection
        if redirection is None:
            words.append(word)
            return
        op, redirection = redirection, None
        if op in ("<<", "<<-"):
            pending.append((word, op == "<<-", stdin))
        elif op == "<<<":
            stdin.append(word + "\n")
        elif op in _OUTPUT and not (op == ">&" and (word.isdigit() or word == "-")):
            writes.append(word)

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t":
            i += 1
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == "\n":
            finish()
            i += 1
            for delimiter, strip_tabs, sink in pending:
                i = _heredoc(text, i, delimiter, strip_tabs, sink)
            pending.clear()
            continue
        if c == "\\" and text.startswith("\\\n", i):
            i += 2
            continue
        op = _match_at(text, i, _REDIRECTIONS)
        if op is not None:
            redirection = op
            i += len(op)
            continue
        op = _match_at(text, i, _LIST_OPERATORS)
        if op is not None:
            finish()
            i += len(op)
            continue
        if text.startswith("$(", i):
            finish()
            i += 2
            continue
        word, i = _word(text, i, variables)
        # Digits right before a redirection name a file descriptor (`2>`), not a word.
        if word.isdigit() and _match_at(text, i, _REDIRECTIONS) is not None:
            continue
        take(word)
    finish()
    return [(words, writes, "".join(stdin)) for words, writes, stdin in done]


def _match_at(text: str, i: int, options: tuple[str, ...]) -> str | None:
    for option in options:
        if text.startswith(option, i):
            return option
    return None


def _heredoc(text: str, i: int, delimiter: str, strip_tabs: bool, sink: list[str]) -> int:
    """Read a here-document's body from `i` into `sink`; the index after its last line."""
    while i < len(text):
        end = text.find("\n", i)
        line = text[i:] if end < 0 else text[i:end]
        i = len(text) if end < 0 else end + 1
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            break
        sink.append(line + "\n")
    return i


def _word(text: str, i: int, variables: Mapping[str, str]) -> tuple[str, int]:
    """One shell word from `i`: quotes removed, known variables expanded."""
    parts: list[str] = []
    n = len(text)
    while i < n:
        plain = _PLAIN.match(text, i)
        if plain:
            parts.append(plain.group())
            i = plain.end()
            continue
        c = text[i]
        if c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            parts.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double_quoted(text, i + 1, variables, parts)
        elif c == "\\":
            parts.append(text[i + 1 : i + 2])
            i += 2
        elif c == "$" and not text.startswith("$(", i):
            i = _variable(text, i, variables, parts)
        elif c == "#":  # inside a word, `#` is an ordinary character
            parts.append(c)
            i += 1
        else:
            break
    return "".join(parts), i


def _double_quoted(text: str, i: int, variables: Mapping[str, str], parts: list[str]) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
            parts.append(text[i + 1] if text[i + 1] != "\n" else "")
            i += 2
        elif c == "$":
            i = _variable(text, i, variables, parts)
        else:
            parts.append(c)
            i += 1
    return n


def _variable(text: str, i: int, variables: Mapping[str, str], parts: list[str]) -> int:
    match = _VARIABLE.match(text, i + 1)
    if match is None:
        parts.append("$")
        return i + 1
    name = match.group(1) or match.group(2)
    parts.append(variables[name] if name in variables else "$" + match.group())
    return match.end()
