from pathlib import Path

import pygit2


def ensure_repo(path: Path) -> bool:
    if (path / ".git").exists():
        return False
    pygit2.init_repository(str(path))
    return True
