"""`hive-office --demo`: a real office of real claude agents whose model is scripted.

Everything but the model is what a person runs: the office, the router, the hooks, the
wake path, the `hive` command, git. Each agent talks to its own scripted Messages API
on 127.0.0.1 (started here, in this process), so no API key is needed and nothing
leaves the machine. The demo's home is its own (`~/.hive-office-demo` by default) and is
laid out afresh on every run, so the story starts from the beginning.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from hive_core.claude_env import claude_environment, write_claude_config
from hive_core.committer import commit_all
from hive_core.demo.brains import GOAL, Brain, ManagerBrain, WorkerBrain
from hive_core.hive import init_office
from hive_core.mail import write_draft
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Draft
from hive_core.scripted_model import ScriptedModel

DEFAULT_DEMO_HOME = "~/.hive-office-demo"
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


class DemoHomeTaken(Exception):
    """The chosen demo home holds someone's files; nothing was touched."""


def demo_home(home: str | None) -> Path:
    return Path(home or DEFAULT_DEMO_HOME).expanduser().absolute()


def start_demo(home: Path, brains: dict[str, Brain] | None = None) -> Demo:
    """Lay out the demo office and start its scripted models (`brains` by agent id, the
    demo's own by default). Call it holding the office lock (a flock on the home folder
    itself): everything in the home but run/ is laid out afresh. Apply `Demo.env` to the office's
    environment before it starts agents."""
    mine = {"run", DEMO_MARK}
    theirs = sorted(e.name for e in home.iterdir() if e.name not in mine) if home.exists() else []
    if theirs and not (home / DEMO_MARK).exists():
        raise DemoHomeTaken(
            f"{home} holds files the demo did not make ({', '.join(theirs[:3])}"
            f"{', ...' if len(theirs) > 3 else ''}); the demo lays its home out afresh each "
            "run, so give it a new or empty folder with --home."
        )
    for entry in home.iterdir() if home.exists() else []:
        if entry.name not in mine:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    home.mkdir(parents=True, exist_ok=True)
    (home / DEMO_MARK).write_text("laid out by hive-office --demo; cleared on its next run\n")
    project = home / "project"
    project.mkdir(parents=True)
    config_dir = home / "claude"
    write_claude_config(config_dir, DEMO_API_KEY, trusted=[project])
    brains = brains or {
        agent: ManagerBrain(agent) if n == 0 else WorkerBrain(agent)
        for n, (agent, _name, _role) in enumerate(AGENTS)
    }
    models = {agent: ScriptedModel(brain) for agent, brain in brains.items()}
    for model in models.values():
        model.start()
    roster = '[office]\nname = "Scranton (demo)"\nmanager = "michael"\n'
    for agent, name, role in AGENTS:
        roster += (
            f'\n[[agents]]\nid = "{agent}"\nname = "{name}"\nrole = "{role}"\nprovider = "claude"\n'
            f'cwd = "{project}"\nenv = {{ ANTHROPIC_BASE_URL = "{models[agent].base_url}" }}\n'
        )
    paths = HivePaths(home)
    (home / "office.toml").write_text(roster)
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
