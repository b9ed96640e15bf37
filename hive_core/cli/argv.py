"""The mail verbs' command lines, parsed and explained the way click does it.

Agents run `hive send/reply/inbox/read/done` on every mail action, so those verbs do
without importing click (cli/hive.py). This is the part of click they use, with its
rules and its texts: long options with a value (`--to ID` or `--to=ID`; the word after
the option is its value even if it starts with a dash), flags, choices, required
options, positional words (one, optional or any number), `--`, `-h`/`--help`, click's
usage errors and its help layout. Pure: words in, values or text out.
"""

from __future__ import annotations

import textwrap
from typing import Any, Literal, NamedTuple

from hive_core.errors import OfficeError

HELP_OPTIONS = ("-h", "--help")
_COLUMN_MAX = 30  # click's widest first column in an option table


class Option(NamedTuple):
    name: str  # --like-this; its value is stored under like_this
    help: str
    metavar: str | None = None  # None: a flag
    choices: tuple[str, ...] = ()
    default: str | None = None
    required: bool = False

    @property
    def dest(self) -> str:
        return self.name[2:].replace("-", "_")


class Argument(NamedTuple):
    dest: str
    metavar: str
    nargs: Literal["one", "optional", "many"]


class Spec(NamedTuple):
    prog: str  # "hive send"
    about: str  # the help text: a first line, then paragraphs and examples as written
    options: tuple[Option, ...]
    arguments: tuple[Argument, ...] = ()


class UsageError(OfficeError):
    """The words do not fit the spec; `usage_error` turns it into click's text. Like
    click, an option missing its value or given one it does not take is said without
    the usage lines."""

    def __init__(self, message: str, *, with_usage: bool = True) -> None:
        super().__init__(message)
        self.with_usage = with_usage


def parse(spec: Spec, words: list[str]) -> dict[str, Any] | None:
    """The value of every option and argument of `spec` in `words`, or None when they
    ask for help. Raises UsageError with click's sentence for what is wrong."""
    options = {option.name: option for option in spec.options}
    values: dict[str, Any] = {
        o.dest: False if o.metavar is None else o.default for o in options.values()
    }
    given: set[str] = set()
    positional: list[str] = []
    wants_help = False
    rest = iter(words)
    for word in rest:
        if word == "--":
            positional += rest
        elif word == "-" or not word.startswith("-"):
            positional.append(word)
        elif word in HELP_OPTIONS:
            wants_help = True  # after every word is read: a bad one still wins, as in click
        else:
            name, has_value, value = word.partition("=")
            option = options.get(name)
            if option is None:
                raise UsageError(_no_such_option(name, options))
            if option.metavar is None:
                if has_value:
                    raise UsageError(f"Option '{name}' does not take a value.", with_usage=False)
                values[option.dest] = True
                continue
            if not has_value:
                following = next(rest, None)
                if following is None:
                    raise UsageError(f"Option '{name}' requires an argument.", with_usage=False)
                value = following
            values[option.dest] = value
            given.add(name)
    if wants_help:
        return None
    # Then, as click does: the options given (their choices), then the ones missing.
    for option in spec.options:
        value = values[option.dest]
        if option.choices and option.name in given and value not in option.choices:
            choices = ", ".join(repr(c) for c in option.choices)
            raise UsageError(
                f"Invalid value for '{option.name}': {value!r} is not one of {choices}."
            )
    for option in spec.options:
        if option.required and option.name not in given:
            raise UsageError(f"Missing option '{option.name}'.")
    values.update(_arguments(spec.arguments, positional))
    return values


def _arguments(arguments: tuple[Argument, ...], words: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    left = list(words)
    for argument in arguments:
        if argument.nargs == "many":
            values[argument.dest], left = tuple(left), []
        elif left:
            values[argument.dest] = left.pop(0)
        elif argument.nargs == "one":
            raise UsageError(f"Missing argument '{argument.metavar}'.")
        else:
            values[argument.dest] = None
    if left:
        noun = "argument" if len(left) == 1 else "arguments"
        raise UsageError(f"Got unexpected extra {noun} ({' '.join(left)})")
    return values


def _no_such_option(name: str, options: dict[str, Option]) -> str:
    import difflib  # only on this error path

    close = sorted(difflib.get_close_matches(name, [*options, *HELP_OPTIONS]))
    if len(close) == 1:
        return f"No such option '{name}'. Did you mean '{close[0]}'?"
    if close:
        return f"No such option '{name}'. (Did you mean one of: {', '.join(map(repr, close))}?)"
    return f"No such option '{name}'."


# --- texts ------------------------------------------------------------------------------


def usage(spec: Spec) -> str:
    shown = {"one": "{}", "optional": "[{}]", "many": "[{}]..."}
    words = [shown[a.nargs].format(a.metavar) for a in spec.arguments]
    return " ".join([f"Usage: {spec.prog} [OPTIONS]", *words])


def usage_error(spec: Spec, error: UsageError) -> str:
    if not error.with_usage:
        return f"Error: {error}"
    return f"{usage(spec)}\nTry '{spec.prog} --help' for help.\n\nError: {error}"


def help_text(spec: Spec, width: int) -> str:
    """`--help` as click lays it out, `width` columns wide."""
    about = "\n".join(f"  {line}".rstrip() for line in spec.about.splitlines())
    rows = [_row(option) for option in spec.options]
    rows.append((", ".join(HELP_OPTIONS), "Show this message and exit."))
    first = min(max(len(term) for term, _ in rows), _COLUMN_MAX) + 2
    lines = [usage(spec), "", about, "", "Options:"]
    for term, text in rows:
        wrapped = textwrap.wrap(text, max(width - first - 2, 10))
        if len(term) <= first - 2:
            lines.append(f"  {term:<{first}}{wrapped[0]}")
        else:
            lines += [f"  {term}", f"  {'':<{first}}{wrapped[0]}"]
        lines += [f"  {'':<{first}}{line}" for line in wrapped[1:]]
    return "\n".join(lines)


def _row(option: Option) -> tuple[str, str]:
    term = option.name
    if option.choices:
        term += f" [{'|'.join(option.choices)}]"
    elif option.metavar is not None:
        term += f" {option.metavar}"
    extras = []
    if option.required:
        extras.append("required")
    if option.default:
        extras.append(f"default: {option.default}")
    return term, option.help + (f"  [{'; '.join(extras)}]" if extras else "")
