"""A real `hive-office serve` process, as tests that need the office's own process use it.

    office = ServedOffice(home, roster=TOML)   # writes office.toml and inits the home
    office.start()                             # waits for the control socket
    office.run("hive-office", "status")        # a console script against this home
    office.stop()                              # SIGTERM, returns serve's exit code

`with served(...) as office:` starts it and, at the end, stops it if it still runs and
checks that it stopped cleanly. The environment is the test's own without any HIVE_*
variable (so nothing of the person's office leaks in), plus what the test adds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hive_core.hive import init_office
from hive_core.paths import HivePaths
from tests.support import wait_for

BIN = Path(sys.executable).parent


class ServedOffice:
    def __init__(
        self,
        home: Path,
        *,
        roster: str | None = None,
        agents: bool = True,
        log: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`roster`: write it as office.toml and init the home (else the home is ready);
        `agents`: start the roster's CLIs (`--no-agents` otherwise); `log`: where serve's
        output goes (default: serve.out beside the home)."""
        self.paths = HivePaths(home)
        if roster is not None:
            home.mkdir(parents=True, exist_ok=True)
            self.paths.office_toml.write_text(roster)
            init_office(self.paths)
        self.agents = agents
        self.log = log or home.parent / "serve.out"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.paths.home

    def start(self) -> ServedOffice:
        argv = [str(BIN / "hive-office"), "serve", "--home", str(self.home)]
        if not self.agents:
            argv.append("--no-agents")
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        proc = self.proc
        wait_for(
            lambda: self.paths.control_socket.exists() or proc.poll() is not None,
            "the office to start",
        )
        assert proc.poll() is None, f"serve exited {proc.returncode}: {self.log.read_text()}"
        return self

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None, "the office was never started"
        return self.proc

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int:
        assert self.proc is not None, "the office was never started"
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def run(self, *args: str, agent: str | None = None) -> subprocess.CompletedProcess[str]:
        """A console script of this venv (`hive-office ...`, `hive ...`) against this home."""
        env = dict(self.env, HIVE_HOME=str(self.home))
        if agent:
            env["HIVE_AGENT_ID"] = agent
        argv = [str(BIN / args[0]), *args[1:]]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

    def registry(self) -> dict[str, dict[str, Any]]:
        try:
            entries = json.loads(self.paths.registry.read_text())["agents"]
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {e["id"]: e for e in entries}

    def agent_log(self, agent: str) -> list[str]:
        """The office's log lines about `agent` (started, exited, ...)."""
        if not self.paths.log.exists():
            return []
        lines = [json.loads(line) for line in self.paths.log.read_text().splitlines() if line]
        return [e["detail"] for e in lines if e.get("kind") == "agent" and e.get("agent") == agent]

    def starts(self, agent: str) -> list[str]:
        return [d for d in self.agent_log(agent) if d.startswith("started ") and "(pid " in d]


@contextmanager
def served(home: Path, **options: Any) -> Iterator[ServedOffice]:
    """A ServedOffice (see its options), started; stopped cleanly at the end if it runs."""
    office = ServedOffice(home, **options).start()
    try:
        yield office
    finally:
        if office.running():
            assert office.stop() == 0, office.log.read_text()
