"""An agent turned hostile, from its own shell, against the office's git and the files
it reads in the agent's worktree (issue 24): a real `hive-office serve`, real shell
desks in real git worktrees, real git.

- Every git setting that runs a program is planted (the agent's worktree config, the
  shared .git/config and its hooks, an included file, the person's global config,
  .gitattributes and info/attributes naming the drivers): the office's worktree loop,
  `hive-office diff`, `merge`, `worktree remove` and the worktree's checkout again at a
  start still give the right answer, and none of the planted programs ever runs. Plain git in the same worktree does run them (the
  plant is live).
- FIFOs (one behind a symlink, one plain, one outside the worktree), a symlink to
  /dev/zero, a 4 GiB sparse file and a config include that is a FIFO: the loop keeps
  warning, `diff` answers, `stop` finishes and a new office starts on the same home.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from hive_core.mail import message_names
from tests.serve_support import ServedOffice
from tests.support import wait_for

SHELL = 'provider = "shell"\ncommand = ["bash", "--norc", "--noprofile", "-i"]\n'

# Every hook git knows (githooks(5)); each planted one says it ran.
HOOKS = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
    "pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase",
    "post-checkout", "post-merge", "pre-push", "pre-receive", "update", "proc-receive",
    "post-receive", "post-update", "reference-transaction", "push-to-checkout",
    "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
    "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit",
    "post-index-change",
)  # fmt: skip

# name -> the config key it is planted as (in the shared .git/config unless said).
PLANTED = {
    "fsmonitor": "core.fsmonitor",
    "filter-clean": "filter.evilc.clean",
    "filter-smudge": "filter.evilc.smudge",
    "filter-process": "filter.evilp.process",
    "textconv": "diff.evild.textconv",
    "diff-command": "diff.evild.command",
    "diff-external": "diff.external",
    "merge-driver": "merge.evilm.driver",
    "pager": "core.pager",
    "pager-diff": "pager.diff",
    "editor": "core.editor",
    "sequence-editor": "sequence.editor",
    "gpg": "gpg.program",
    "gpg-ssh": "gpg.ssh.program",
    "ssh": "core.sshCommand",
    "proxy": "core.gitProxy",
    "askpass": "core.askPass",
    "credential": "credential.helper",
    "pack-objects": "uploadpack.packObjectsHook",
    "alternate-refs": "core.alternateRefsCommand",
}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


def plant_script(marks: Path) -> str:
    """What the agent runs in its worktree: commit its work with plain git first (its
    own git, which the plant would trip), then plant every setting, then change files
    so the office's next look has something to compare and filter."""
    programs = [*PLANTED, "filter-include", "filter-worktree", "filter-global"]
    attributes = (
        "* filter=evilc diff=evild merge=evilm\\nb.txt filter=evilp\\nc.txt filter=evili\\n"
        "d.txt filter=evilw\\ne.txt filter=evilg\\n"
    )
    lines = [
        "set -e",
        f"M={marks}",
        "printf 'one\\ntwo\\nthree\\njim\\nfive\\n' > a.txt",
        'git commit -qam "jim\'s work"',
        "C=$(git rev-parse --path-format=absolute --git-common-dir)",
        'mkdir -p "$M/bin" "$M/hooks" "$C/hooks" "$C/info"',
        f"for p in {' '.join(programs)}; do",
        '  printf \'#!/bin/sh\\necho %s >> %s/ran\\ncat\\n\' "$p" "$M" > "$M/bin/$p"',
        '  chmod +x "$M/bin/$p"',
        "done",
        f"for h in {' '.join(HOOKS)}; do",
        '  printf \'#!/bin/sh\\necho hook-%s >> %s/ran\\n\' "$h" "$M" > "$M/hooks/$h"',
        '  cp "$M/hooks/$h" "$C/hooks/$h"',
        '  chmod +x "$M/hooks/$h" "$C/hooks/$h"',
        "done",
        *(
            f'git config {key} "$M/bin/{name}"'
            for name, key in PLANTED.items()
            if name not in ("merge-driver", "credential")
        ),
        'git config core.hooksPath "$M/hooks"',
        "git config filter.evilc.required true",
        'git config merge.evilm.driver "$M/bin/merge-driver %O %A %B"',
        'git config credential.helper "!$M/bin/credential"',
        "git config commit.gpgSign true",
        'git config include.path "$M/more.config"',
        'printf \'[filter "evili"]\\n\\tclean = %s/bin/filter-include\\n\' "$M" > "$M/more.config"',
        "git config extensions.worktreeConfig true",
        'git config --worktree filter.evilw.clean "$M/bin/filter-worktree"',
        'git config --global filter.evilg.clean "$M/bin/filter-global"',
        f"printf '{attributes}' > .gitattributes",
        f"printf '{attributes}' > \"$C/info/attributes\"",
        'for f in b c d e; do echo "jim $f" > $f.txt; done',
        "echo new > new.txt",
        'touch "$M/planted"',
    ]
    return "\n".join(lines) + "\n"


def repository(root: Path, env: dict[str, str]) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", env=env)
    git(repo, "config", "user.email", "person@example.com", env=env)
    git(repo, "config", "user.name", "Person", env=env)
    (repo / "a.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    for f in "bcde":
        (repo / f"{f}.txt").write_text(f"{f}\n")
    git(repo, "add", ".", env=env)
    git(repo, "commit", "-qm", "init", env=env)
    return repo


def roster(repo: Path) -> str:
    return (
        # contain = false: a contained desk could not plant in the shared .git (the
        # person's checkout) at all (tests/e2e/test_contained_desks.py); this is about the
        # office's git when a plant is there (an uncontained desk, the person's own).
        '[office]\nname = "Scranton"\nmanager = "michael"\nworktree_check_s = 0.2\n'
        "contain = false\n\n"
        f'[[agents]]\nid = "michael"\nname = "Michael"\n{SHELL}cwd = "{repo}"\n\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\n{SHELL}cwd = "{repo}"\n\n'
        f'[[agents]]\nid = "pam"\nname = "Pam"\n{SHELL}cwd = "{repo}"\n'
    )


def inbox(office: ServedOffice, agent: str, about: str) -> list[dict[str, Any]]:
    box = office.paths.mailbox(agent).inbox
    found = []
    for name in message_names(box):
        message = json.loads((box / name).read_text())
        if about in message["subject"]:
            found.append(message)
    return found


@pytest.fixture
def desk(short_tmp: Path) -> Iterator[tuple[ServedOffice, Path, dict[str, str]]]:
    """A served office of shell desks on a repository, with a HOME of the test's own (the
    agent plants the person's global config there)."""
    home = short_tmp / "person"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIVE_", "GIT_"))}
    env |= {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    repo = repository(short_tmp, env)
    office = ServedOffice(short_tmp / "home", roster=roster(repo), env=env)
    office.start()
    try:
        for agent in ("michael", "jim", "pam"):
            wait_for(partial(office.starts, agent), f"{agent} started")
        yield office, repo, env
    finally:
        if office.running():
            office.stop()


def typed(office: ServedOffice, agent: str, line: str) -> None:
    done = office.run("hive-office", "type", agent, line)
    assert done.returncode == 0, done.stderr


def test_no_program_an_agent_plants_in_git_runs_as_the_office(
    desk: tuple[ServedOffice, Path, dict[str, str]], short_tmp: Path
) -> None:
    office, repo, env = desk
    marks = short_tmp / "marks"
    ran = marks / "ran"
    # The person moves main on after the worktrees were made: merging jim's a.txt
    # change is then a real three-way merge of that file (where a merge driver runs).
    (repo / "a.txt").write_text("ONE\ntwo\nthree\nfour\nfive\n")
    git(repo, "commit", "-qam", "person's work", env=env)
    script = short_tmp / "plant.sh"
    script.write_text(plant_script(marks))
    typed(office, "jim", f"bash {script}")
    wait_for(lambda: (marks / "planted").exists(), "jim's plant")
    assert not ran.exists(), ran.read_text()

    # The loop: pam changes b.txt too, and both are told (a pass over jim's planted
    # worktree has run).
    typed(office, "pam", "echo pam > b.txt")
    for agent in ("jim", "pam", "michael"):
        wait_for(partial(inbox, office, agent, "b.txt"), f"{agent} warned of b.txt")
    assert not ran.exists(), ran.read_text()

    # diff: the right answer, with no filter, textconv or pager between.
    done = office.run("hive-office", "diff", "jim", "--stat")
    assert done.returncode == 0, done.stderr
    for changed in ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "new.txt", ".gitattributes"):
        assert changed in done.stdout
    out = office.run("hive-office", "diff", "jim")
    assert out.returncode == 0, out.stderr
    assert "+jim b" in out.stdout and "+jim e" in out.stdout and "+new" in out.stdout
    assert not ran.exists(), ran.read_text()

    # merge into the person's checked-out main: a three-way merge of a.txt, a merge
    # commit, hooks all around it, and signing asked for.
    done = office.run("hive-office", "merge", "jim", "--yes")
    assert done.returncode == 0, done.stderr + done.stdout
    assert (repo / "a.txt").read_text() == "ONE\ntwo\nthree\njim\nfive\n"
    assert git(repo, "log", "-1", "--format=%P", env=env).count(" ") == 1  # a merge commit
    assert not ran.exists(), ran.read_text()

    # remove: refused, since jim's worktree holds uncommitted work (git status there).
    done = office.run("hive-office", "worktree", "remove", "jim")
    assert done.returncode == 1 and "uncommitted work" in done.stderr, done.stderr
    assert not ran.exists(), ran.read_text()

    # worktree add: jim's folder is gone, and the next start checks his branch out
    # again (a checkout: smudge filters, post-checkout hook).
    assert office.stop() == 0, office.log.read_text()
    work = office.paths.worktree("jim")
    shutil.rmtree(work)
    office.start()
    wait_for(lambda: len(office.starts("jim")) > 1, "jim started again")
    assert (work / "a.txt").read_text() == "one\ntwo\nthree\njim\nfive\n"
    assert not ran.exists(), ran.read_text()

    # The plant is live: plain git in the same places runs what was planted (the
    # worktree's own config went with its folder).
    for f in "bcde":
        (work / f"{f}.txt").write_text(f"again {f}\n")
    for argv, cwd in (
        (["git", "diff"], office.paths.worktree("jim")),
        (["git", "commit", "--allow-empty", "-qm", "x"], repo),
    ):
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    said = set(ran.read_text().split())
    assert {
        "fsmonitor",
        "filter-process",
        "filter-include",
        "filter-clean",
        "filter-global",
        "diff-command",
        "hook-pre-commit",
        "gpg",
    } <= said, said


def test_an_agents_fifos_links_and_huge_files_never_wedge_the_office(
    desk: tuple[ServedOffice, Path, dict[str, str]], short_tmp: Path
) -> None:
    office, _, env = desk
    outside = short_tmp / "outside"
    outside.mkdir()
    work = office.paths.worktree("jim")
    typed(
        office,
        "jim",
        f"mkfifo {outside}/fifo pipe && ln -s {outside}/fifo link && ln -s /dev/zero zero"
        f" && truncate -s 4G huge && echo jim > shared.txt && touch {outside}/done",
    )
    wait_for(lambda: (outside / "done").exists(), "jim's files")
    typed(office, "pam", "echo pam > shared.txt")
    for agent in ("jim", "pam", "michael"):
        wait_for(partial(inbox, office, agent, "shared.txt"), f"{agent} warned of shared.txt")

    done = office.run("hive-office", "diff", "jim")
    assert done.returncode == 0, done.stderr
    assert "+jim" in done.stdout
    # A symlink is shown as one (its target), never read through; the huge file as binary.
    assert "new file mode 120000" in done.stdout and f"+{outside}/fifo" in done.stdout
    assert "Binary files /dev/null and b/huge differ" in done.stdout
    assert "pipe" not in done.stdout

    # Now the repository's own config includes a FIFO: every git there would wait on it.
    git(work, "config", "include.path", str(outside / "fifo"), env=env)
    typed(office, "pam", "echo pam again > shared2.txt")
    # diff says so and ends, rather than wait on it.
    done = office.run("hive-office", "diff", "jim")
    assert done.returncode == 1
    assert "could not read the repository's config" in done.stderr, done.stderr

    done = office.run("hive-office", "stop")
    assert done.returncode == 0, done.stderr + office.log.read_text()
    assert office.process.wait() == 0
    assert not office.paths.pid_file.exists()
    # The home's lock is free: a new office starts on it (and stops).
    again = ServedOffice(office.home, env=env)
    again.start()
    assert again.stop() == 0
    assert (work / "shared.txt").read_text() == "jim\n"
