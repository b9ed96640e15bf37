"""Cost on screen: the office's cost loop reads a Claude transcript and the app shows the
agent's cost in its pane title and the task's in the Tasks tab (a real `hive-office serve`
with the app attached over the SocketLink, tests/app/conftest.py; real files)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import msgspec

from hive_core.cost import UsageFile
from hive_core.hive import init_office
from hive_core.ids import utc_now_iso
from hive_core.paths import HivePaths
from hive_core.team.tasks import save_ledger
from hive_tui.panels.tasks import TasksPanel
from tests.app.conftest import ServeApp, run_app
from tests.support import until

SESSION = "0b5a1d2e-0000-4000-8000-000000000001"


def roster(root: Path) -> str:
    # jim's CLI is not installed: his transcript is there from an earlier run.
    return (
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\ncwd = "{root}"\n'
        f"command = ['{sys.executable}', '-c', 'import time; time.sleep(600)']\n\n"
        f'[[agents]]\nid = "jim"\nname = "Jim"\nprovider = "claude"\ncwd = "{root}"\n'
        'command = ["claude-not-installed-here"]\n'
        f'env = {{ CLAUDE_CONFIG_DIR = "{root / "claude"}" }}\n'
    )


def transcript_line(ts: str) -> str:
    usage = {"input_tokens": 0, "output_tokens": 28_000}
    message = {"id": "msg_1", "model": "claude-sonnet-4-5-20250929", "usage": usage}
    return json.dumps({"type": "assistant", "timestamp": ts, "message": message})


async def test_pane_title_and_tasks_tab_show_the_cost(short_tmp: Path, serve_app: ServeApp) -> None:
    root = short_tmp
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(roster(root))
    init_office(paths)
    now = utc_now_iso()
    task = {"id": "t1", "title": "Parse", "assignee": "jim", "status": "doing"}
    save_ledger(paths.tasks, {"tasks": [{**task, "created_at": now, "updated_at": now}]})
    # The office learnt jim's session on an earlier run.
    paths.run.mkdir(exist_ok=True)
    paths.usage_file.write_bytes(msgspec.json.encode(UsageFile(sessions={"jim": [SESSION]})))
    transcript = root / "claude" / "projects" / "-tmp-project" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    # The call came after jim took the task.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    transcript.write_text(transcript_line(later.isoformat().replace("+00:00", "Z")) + "\n")

    app = serve_app(paths)
    async with run_app(app, (160, 48)) as pilot:
        pane = app.pane("jim")
        await until(pilot, lambda: "$0.42" in str(pane.border_title), "the cost in the title")
        panel = app.query_one(TasksPanel)
        await until(
            pilot,
            lambda: any(key == "t1" and row[-1].plain == "$0.42" for key, row in panel.rows()),
            "the task's cost in the Tasks tab",
        )
        written = msgspec.json.decode(paths.usage_file.read_bytes(), type=UsageFile)
        assert written.sessions == {"jim": [SESSION]}
        assert written.agents["jim"].tokens.output == 28_000
