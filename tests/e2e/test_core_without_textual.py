"""The core stands without the app: hive_core never imports Textual or hive_tui, and its
command line runs (help, init, doctor, a headless office) with both unimportable."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import hive_core
from tests.support import wait_for

APP_PACKAGES = ("textual", "hive_tui")
# Runs `python -m hive_core.cli.office ARGS` with the app's packages made unimportable.
WITHOUT_APP = f"""
import runpy, sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {APP_PACKAGES!r}:
            raise ImportError(f"{{name}} is blocked: the core must run without the app")
        return None

sys.meta_path.insert(0, Blocked())
sys.argv[0] = "hive-office"
runpy.run_module("hive_core.cli.office", run_name="__main__", alter_sys=True)
"""


def core(*args: str, home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "HIVE_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-c", WITHOUT_APP, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_no_core_module_imports_the_app() -> None:
    offenders = []
    for path in Path(hive_core.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in APP_PACKAGES]
    assert offenders == []


def test_the_blocker_blocks(tmp_path: Path) -> None:
    """The allowed path's proof: the same interpreter set-up refuses the app itself."""
    code = WITHOUT_APP.replace("hive_core.cli.office", "hive_tui.main")
    run = subprocess.run(
        [sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0 and "is blocked" in run.stderr


def test_the_core_command_line_runs_without_the_app(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out, err = finished(core("--help", home=home))
    assert code == 0 and "serve" in out and "escalations" in out, err

    code, out, err = finished(core("init", home=home))
    assert code == 0 and "Created the office" in out, err

    code, out, err = finished(core("doctor", home=home))
    # doctor exits 1 when something needs fixing here (a CLI not installed): fine, as
    # long as it ran to its list.
    assert code in (0, 1) and "Traceback" not in err and out.strip(), err

    serving = core("serve", "--no-agents", home=home)
    try:
        control = home / "run" / "control.sock"

        def opened() -> bool:
            assert serving.poll() is None, serving.communicate()
            return control.exists()

        wait_for(opened, "the office to open its control socket")
        status = subprocess.run(
            [sys.executable, "-c", WITHOUT_APP, "status"],
            env={**os.environ, "HIVE_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0 and '"agents"' in status.stdout, status.stderr
    finally:
        serving.send_signal(signal.SIGTERM)
    code, out, err = finished(serving)
    assert code == 0 and "stopped" in out and "Traceback" not in err, err
