"""memory.db shared by processes (the office, the app, `hive`, MCP): a process that opens
one more connection while it holds one keeps its SQLite locks, so another process closing
its own connection does not take itself for the last one and delete the -wal the first
one still writes into (which no other process would then read)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hive_core.hive import init_office
from hive_core.memory import open_store
from hive_core.paths import HivePaths

OTHER_PROCESS = """
import sys
from pathlib import Path
from hive_core.memory import open_store
from hive_core.paths import HivePaths
with open_store(HivePaths(Path(sys.argv[1]))) as store:
    print(len(store.search("soak", "human", "all", 20)))
"""


def test_a_second_connection_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    wal = paths.memory_db.with_name("memory.db-wal")
    with open_store(paths) as held:
        held.reindex()
        # Another connection in this process: each open looks at the file's header.
        with open_store(paths):
            pass
        subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(paths.home)], check=True)
        assert wal.exists(), "the other process deleted the -wal this one writes into"
        paths.board.write_text("# Plan\n\nThe rollout waits for the staging soak.\n")
        held.reindex()
        seen = subprocess.run(
            [sys.executable, "-c", OTHER_PROCESS, str(paths.home)],
            check=True,
            capture_output=True,
            text=True,
        )
        assert int(seen.stdout) >= 1, "another process does not see what this one wrote"
