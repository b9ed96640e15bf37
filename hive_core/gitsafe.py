"""How the office runs git in a repository an agent can write (its worktree, the
person's checkout it was made from, a remote desk's): with every setting that would
run a program switched off, so nothing an agent writes into a git config, a hook folder
or a .gitattributes runs as the office (pure: argv, environment and shell text).

Two layers. Settings with fixed names (hooks, fsmonitor, external diff, pager, signing,
credential helpers, transports, maintenance) are given on the command line, which
outranks every config file. Drivers are named by the repository (`filter.<name>.clean`
chosen by a `.gitattributes` line, say), so their names are read first with `git config
--name-only --list` (reading config runs nothing) and each one found is emptied (a
merge driver is made git's own file merge): git runs no filter or diff driver whose
command is empty. The driver layer is a read then a run: a driver named in the few
milliseconds between the two is not seen.

A repository's own filters (git-lfs among them) therefore do not run in the office's
git either: a worktree the office checks out, or a merge it makes, holds LFS pointer
files until `git lfs checkout` (office.worktree_setup can run it).
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Iterable, Mapping, Sequence

# Fixed-name settings that run a program (or pick one), each set to what runs nothing.
SAFE_SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.quotepath", "off"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.attributesFile", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("diff.external", ""),
    ("diff.ignoreSubmodules", "dirty"),
    ("submodule.recurse", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("commit.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("log.showSignature", "false"),
    ("uploadpack.packObjectsHook", ""),
    ("maintenance.auto", "false"),
    ("gc.auto", "0"),
)

# Settings whose name the repository chooses (the `*`), and what each found is set to.
DRIVER_SETTINGS: tuple[tuple[str, str], ...] = (
    ("filter.*.clean", ""),
    ("filter.*.smudge", ""),
    ("filter.*.process", ""),
    # An emptied filter marked required would fail the command instead of passing the
    # content through as it is.
    ("filter.*.required", "false"),
    # An empty merge driver is still run (and fails the merge); git's own three-way
    # file merge is what a file with no driver gets.
    ("merge.*.driver", "git merge-file %A %O %B"),
    ("diff.*.command", ""),
    ("diff.*.textconv", ""),
    ("credential.*.helper", ""),
)

# Variables from the office's own environment that would point git elsewhere or run
# something of their own; the office's git sets its own configuration variables.
DROPPED_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX",
    "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS", "SSH_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND",
    "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_TRACE_FSMONITOR",
)  # fmt: skip

# Set for every call: no system-wide config or attributes, no prompt, nothing to page.
SAFE_VARS: dict[str, str] = {
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
}

# Added to every diff: no external diff program, no textconv filter.
DIFF_FLAGS = ("--no-ext-diff", "--no-textconv")

LIST_NAMES = ("config", "--null", "--name-only", "--list")


def argv(args: Sequence[str], git: str = "git") -> list[str]:
    """git with the fixed settings switched off, then `args`."""
    words = [git]
    for key, value in SAFE_SETTINGS:
        words += ["-c", f"{key}={value}"]
    return [*words, *args]


def driver_overrides(names: Iterable[str]) -> list[tuple[str, str]]:
    """The repository's driver settings (from `git config --name-only --list`), each with
    the value that runs nothing."""
    found: dict[str, str] = {}
    for name in names:
        for pattern, value in DRIVER_SETTINGS:
            if fnmatch.fnmatchcase(name, pattern):
                found[name] = value
    return sorted(found.items())


def parse_names(out: bytes) -> list[str]:
    """`git config --null --name-only --list`: one name per NUL."""
    return [n.decode("utf-8", "surrogateescape") for n in out.split(b"\0") if n]


def environment(
    base: Mapping[str, str], overrides: Sequence[tuple[str, str]] = ()
) -> dict[str, str]:
    """The environment for a git call: `base` without DROPPED_VARS, SAFE_VARS set, and
    `overrides` as command-line settings (GIT_CONFIG_COUNT: a name holding `=` stays
    whole, which `-c` would split)."""
    env = {
        k: v
        for k, v in base.items()
        if k not in DROPPED_VARS and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }
    env.update(SAFE_VARS)
    for n, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    if overrides:
        env["GIT_CONFIG_COUNT"] = str(len(overrides))
    return env


def shell_prelude() -> str:
    """The same for a git run by a remote host's /bin/sh: drop and set the variables,
    then read the repository's driver names and empty each (one name a line: a config
    file cannot put a newline in a name)."""
    # A case pattern's `*` matches as fnmatchcase's does (dots included).
    cases = [
        f'{pattern}) export "GIT_CONFIG_KEY_$n=$k" "GIT_CONFIG_VALUE_$n={value}"; n=$((n+1));;'
        for pattern, value in DRIVER_SETTINGS
    ]
    listing = " ".join(shlex.quote(a) for a in argv(["config", "--name-only", "--list"]))
    sets = " ".join(shlex.quote(f"{k}={v}") for k, v in SAFE_VARS.items())
    return (
        f"unset {' '.join(DROPPED_VARS)}; export {sets}; n=0; "
        f"while IFS= read -r k; do case $k in {' '.join(cases)} esac; done <<HIVE_EOF\n"
        f"$({listing} 2>/dev/null)\nHIVE_EOF\n"
        'export GIT_CONFIG_COUNT="$n"; '
    )


def shell_words(args: Sequence[str]) -> str:
    """One hardened git command for a remote shell (after shell_prelude)."""
    return " ".join(shlex.quote(a) for a in argv(args))
