"""`hive-office --demo`: a real office of real claude agents whose model is scripted.

Everything but the model is what a person runs: the office, the router, the hooks, the
wake path, the `hive` command, git. Each agent talks to its own scripted Messages API
on 127.0.0.1 (started here, in this process), so no API key is needed and nothing
leaves the machine. The demo's home is its own (`~/.hive-office-demo` by default) and is
laid out afresh on every run, so the story starts from the beginning: it takes only an
empty folder or one a previous demo marked, and deletes only what a demo made there.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from hive_core.committer import commit_all
from hive_core.demo.brains import GOAL, Brain, ManagerBrain, WorkerBrain
from hive_core.demo.claude_env import claude_environment, write_claude_config
from hive_core.demo.scripted_model import ScriptedModel
from hive_core.errors import OfficeError
from hive_core.hive import init_office
from hive_core.mail import write_draft
from hive_core.paths import DEFAULT_DEMO_HOME, HivePaths
from hive_core.schema import HUMAN, Draft

# Not a key to anything: the scripted model accepts any. Longer than 20 characters,
# because Claude Code approves a custom key by its last 20.
DEMO_API_KEY = "sk-ant-demo-not-a-real-key-0123456789"
AGENTS = (
    ("michael", "Michael", "Regional manager: runs the floor, plans, delegates, escalates"),
    ("jim", "Jim", "Engineer"),
    ("pam", "Pam", "Engineer"),
)


@dataclass
class Demo:
    paths: HivePaths
    models: dict[str, ScriptedModel]
    brains: dict[str, Brain]
    # What the office process's environment needs so its agents reach the scripted models.
    env: dict[str, str]

    def stop(self) -> None:
        for model in self.models.values():
            model.stop()


# Written into a home the demo laid out: only such a home is ever cleared for a new run.
DEMO_MARK = ".hive-office-demo"


class DemoHomeTaken(OfficeError):
    """The chosen demo home holds someone's files; nothing was touched."""


# What the demo lays out in its home besides the office's own files (HivePaths.locate).
PROJECT = "project"
CLAUDE_CONFIG = "claude"
DEMO_ENTRIES = frozenset({DEMO_MARK, PROJECT, CLAUDE_CONFIG})
# Kept across runs: the office lock's pid file is in it while the demo is laid out.
KEPT = frozenset({DEMO_MARK, "run"})


def refusal(home: Path, names: list[str], marked: bool) -> str | None:
    """Why the demo may not use `home` (holding `names`, marked by a previous demo or
    not), or None. The demo clears its home each run, so it takes only a folder that is
    empty, or a previous demo's holding nothing but what a demo and its office make."""
    if not names:
        return None
    if marked:
        paths = HivePaths(home)
        theirs = [n for n in names if n not in DEMO_ENTRIES and _not_the_offices(paths, n)]
        what, fix = "files no demo made", "Move them out, or give"
    else:
        theirs, what, fix = names, "files the demo did not make", "Give"
    if not theirs:
        return None
    shown = ", ".join(sorted(theirs)[:3]) + (", ..." if len(theirs) > 3 else "")
    return (
        f"{home} holds {what} ({shown}), and the demo clears its home on every run; "
        f"nothing was touched. {fix} the demo an empty folder with --home (or unset "
        f"HIVE_HOME to use {DEFAULT_DEMO_HOME})."
    )


def _not_the_offices(paths: HivePaths, name: str) -> bool:
    place = paths.locate(name)
    return place is None or place.kind == "home_other"


def _is_marked(home: Path) -> bool:
    try:
        return stat.S_ISREG((home / DEMO_MARK).lstat().st_mode)
    except FileNotFoundError:
        return False


def claim_demo_home(home: Path) -> None:
    """Make `home` the demo's (created and marked), or raise DemoHomeTaken with the
    sentence to show; nothing is touched then. Call it before taking the office lock,
    which writes into the home."""
    if home.exists() and not home.is_dir():
        raise DemoHomeTaken(f"{home} is not a folder; give the demo an empty one with --home.")
    names = sorted(os.listdir(home)) if home.exists() else []
    why = refusal(home, names, _is_marked(home))
    if why is not None:
        raise DemoHomeTaken(why)
    home.mkdir(parents=True, exist_ok=True)
    if not _is_marked(home):
        (home / DEMO_MARK).write_text("laid out by hive-office --demo; cleared on its next run\n")


def start_demo(home: Path, brains: dict[str, Brain] | None = None) -> Demo:
    """Lay out the demo office and start its scripted models (`brains` by agent id, the
    demo's own by default). Call it holding the office lock (a flock on the home folder
    itself): everything the last demo made in its home but run/ is laid out afresh, and a
    home holding anything else is refused (DemoHomeTaken) untouched. Apply `Demo.env` to
    the office's environment before it starts agents."""
    claim_demo_home(home)
    for entry in home.iterdir():
        if entry.name not in KEPT:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    project = home / PROJECT
    project.mkdir(parents=True)
    config_dir = home / CLAUDE_CONFIG
    write_claude_config(config_dir, DEMO_API_KEY, trusted=[project])
    brains = brains or {
        agent: ManagerBrain(agent) if n == 0 else WorkerBrain(agent)
        for n, (agent, _name, _role) in enumerate(AGENTS)
    }
    models = {agent: ScriptedModel(brain) for agent, brain in brains.items()}
    for model in models.values():
        model.start()
    # The scripted manager would not know what to do with a floor digest.
    roster = '[office]\nname = "Scranton (demo)"\nmanager = "michael"\nmanager_watch = "off"\n'
    for agent, name, role in AGENTS:
        roster += (
            f'\n[[agents]]\nid = "{agent}"\nname = "{name}"\nrole = "{role}"\nprovider = "claude"\n'
            f'cwd = "{project}"\nenv = {{ ANTHROPIC_BASE_URL = "{models[agent].base_url}" }}\n'
        )
    paths = HivePaths(home)
    paths.office_toml.write_text(roster)
    init_office(paths)
    commit_all(paths.hive, "office: demo initialised")
    # The person's goal, waiting for the manager when the office opens.
    write_draft(
        paths.mailbox(HUMAN),
        Draft(to="michael", act="request", subject="Goal for this week", body=GOAL),
    )
    env = claude_environment(
        base_url=models["michael"].base_url, api_key=DEMO_API_KEY, config_dir=config_dir, base={}
    )
    return Demo(paths=paths, models=models, brains=brains, env=env)


def apply_env(demo: Demo) -> None:
    """Point this process's environment (which the office passes to its agents) at the
    demo's scripted models; the person's own model credentials are left out."""
    for variable in (
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
    ):
        os.environ.pop(variable, None)
    os.environ.update(demo.env)
