"""hive-office installed as a tool, not from the checkout: the wheel in a fresh venv on
Python 3.13 (the newest supported), run from a folder outside the checkout, as
`pipx install .` would leave it.

The wheel is built once (hive_core.remote.setup.build_wheel, as remote-setup builds it)
and pip installs it with its dependencies from the package registry through pip's own
cache. Every process of the office runs with a PATH that holds the new venv and none of
the checkout, from a folder that is no checkout, so anything that only works from a
source tree (package data, paths relative to the repo, the venv the tests run in) fails
here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.paths import HivePaths
from hive_core.remote.setup import build_wheel, source_tree
from tests.support import short_dir, wait_for

ROOT = Path(__file__).resolve().parent.parent.parent
NEWEST = "3.13"
ROSTER = """[office]
manager = "michael"

[[agents]]
id = "michael"
name = "Michael"
provider = "shell"
cwd = "{work}"

[[agents]]
id = "jim"
name = "Jim"
provider = "shell"
cwd = "{work}"
"""


def newest_python() -> str:
    """Python 3.13 as scripts/setup finds it; the test is skipped only where there is none
    (scripts/test says so in its summary, and under CI a missing 3.13 fails the run)."""
    found = subprocess.run(
        [str(ROOT / "scripts" / "find-python"), NEWEST], capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.skip(f"no Python {NEWEST} on this machine (scripts/find-python {NEWEST})")
    return found.stdout.rsplit(" ", 1)[0]


class Installed:
    """A venv holding only `wheel` and its dependencies, and a folder outside the checkout
    to run its commands from."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.venv = root / "venv"
        self.bin = self.venv / "bin"
        self.outside = root / "elsewhere"
        self.outside.mkdir()
        # Nothing of the checkout or of the venv the tests run in: only the new venv's bin
        # and the system's folders (bash, git, tmux).
        test_bin = Path(sys.executable).parent
        path = [
            p
            for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
            if p and Path(p) != test_bin and not Path(p).is_relative_to(ROOT)
        ]
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HIVE_", "PYTHON")) and k != "VIRTUAL_ENV"
        }
        self.env.update(
            PATH=os.pathsep.join([str(self.bin), *path]),
            HOME=str(root / "person"),
            SHELL="/bin/bash",
        )
        (root / "person").mkdir()

    def run(
        self, *argv: str, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A console script of the installed venv, run from outside the checkout."""
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            cwd=self.outside,
            env=dict(self.env, **(env or {})),
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    python = newest_python()
    root = tmp_path_factory.mktemp("installed")
    tree = source_tree()
    assert tree is not None, "the tests run from a checkout"
    place = Installed(root, build_wheel(tree, root / "build"))
    subprocess.run([python, "-m", "venv", str(place.venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(place.bin / "python"), "-m", "pip", "install", "--quiet", str(place.wheel)],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return place


@pytest.fixture
def home() -> Iterator[Path]:
    with short_dir() as root:
        yield root / "home"


def hook_refusals(paths: HivePaths) -> list[str]:
    lines = [json.loads(line) for line in paths.log.read_text().splitlines() if line]
    return [
        e["agent"]
        for e in lines
        if e.get("kind") == "hook" and e["detail"].startswith("refused a hook frame")
    ]


@pytest.mark.timeout(600)
def test_the_installed_office_routes_a_message_from_outside_the_checkout(
    installed: Installed, home: Path
) -> None:
    code = installed.run(
        "python",
        "-c",
        "import hive_core, hive_tui, cth_hook, sys;"
        "print(sys.version_info[:2]);"
        "print('\\n'.join(m.__file__ for m in (hive_core, hive_tui, cth_hook)))",
    )
    assert code.returncode == 0, code.stderr
    version, *modules = code.stdout.splitlines()
    assert version == "(3, 13)"
    site = installed.venv / "lib" / "python3.13" / "site-packages"
    assert all(Path(m).is_relative_to(site) for m in modules), modules
    assert installed.run("hive-office", "--version").stdout.strip() == "hive-office, version 0.1.0"

    work = home.parent / "work"
    work.mkdir()
    home.mkdir()
    (home / "office.toml").write_text(ROSTER.format(work=work))
    init = installed.run("hive-office", "--home", str(home), "init")
    assert init.returncode == 0, init.stderr
    paths = HivePaths(home)
    # The templates are the package's data, not files of the checkout.
    assert paths.protocol.read_text() == (ROOT / "hive_core/templates/PROTOCOL.md").read_text()
    assert paths.manager_policy.read_text() == (ROOT / "hive_core/templates/MANAGER.md").read_text()

    with (home.parent / "serve.out").open("wb") as out:
        serve = subprocess.Popen(
            [str(installed.bin / "hive-office"), "--home", str(home), "serve"],
            cwd=installed.outside,
            env=installed.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: paths.control_socket.exists() or serve.poll() is not None,
            "the installed office to start",
        )
        assert serve.poll() is None, (home.parent / "serve.out").read_text()
        status = json.loads(installed.run("hive-office", "--home", str(home), "status").stdout)
        assert {a["id"]: a["state"] for a in status["agents"]} == {
            "michael": "running",
            "jim": "running",
        }

        # Michael, in its own pane, uses the installed `hive` and `cth-hook` as an agent
        # does: found on its PATH, with the identity and secret the office gave it.
        # In its working folder: a contained desk writes nowhere else.
        proof = work / "proof"
        typed = installed.run(
            "hive-office", "--home", str(home), "type", "michael",
            "hive send --to jim --subject 'from michael' --body 'routed by an installed office';"
            f" command -v hive cth-hook > {proof}.tmp;"
            " printf '{\"hook_event_name\": \"Stop\"}' | cth-hook;"
            f" echo hook exit $? >> {proof}.tmp; mv {proof}.tmp {proof}",
        )  # fmt: skip
        assert typed.returncode == 0, typed.stderr
        wait_for(proof.exists, "michael's commands to finish")
        assert proof.read_text().splitlines() == [
            str(installed.bin / "hive"),
            str(installed.bin / "cth-hook"),
            "hook exit 0",
        ]
        inbox = home / "hive" / "agents" / "jim" / "inbox"
        mail = wait_for(lambda: sorted(inbox.glob("*.json")), "the message in jim's inbox")
        message = json.loads(mail[0].read_text())
        assert (message["from"], message["subject"], message["body"]) == (
            "michael",
            "from michael",
            "routed by an installed office",
        )

        # The installed cth-hook reaches the office: a frame with a stale secret is
        # refused and logged, while michael's, carrying its secret, was taken.
        stale = installed.run(
            "cth-hook",
            env={
                "HIVE_SOCKET": str(paths.hook_socket),
                "HIVE_AGENT_ID": "jim",
                "HIVE_SECRET": "not-jims-secret",
            },
            input='{"hook_event_name": "Stop"}',
        )
        assert (stale.returncode, stale.stdout) == (0, "")  # it fails open
        wait_for(lambda: "jim" in hook_refusals(paths), "the office to refuse the stale frame")
        assert "michael" not in hook_refusals(paths)

        stop = installed.run("hive-office", "--home", str(home), "stop")
        assert stop.returncode == 0, stop.stderr
        assert serve.wait(timeout=60) == 0, (home.parent / "serve.out").read_text()
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


def test_remote_setup_packs_the_installed_office_as_the_wheel_it_came_from(
    installed: Installed, tmp_path: Path
) -> None:
    """Installed as a tool there is no source tree to build from: remote-setup packs the
    installed files again, and that wheel holds what the original held and installs."""
    out = tmp_path / "packed"
    out.mkdir()
    packed = installed.run(
        "python",
        "-c",
        "import sys, pathlib; from hive_core.remote import setup;"
        "assert setup.source_tree() is None, setup.source_tree();"
        "print(setup.this_wheel(pathlib.Path(sys.argv[1]), sys.stderr))",
        str(out),
    )
    assert packed.returncode == 0, packed.stderr
    assert packed.stderr == "packing the installed hive-office 0.1.0\n"
    wheel = Path(packed.stdout.strip())
    assert wheel.name == installed.wheel.name

    def members(path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(path) as z:
            return {n: z.read(n) for n in z.namelist() if not n.endswith("/RECORD")}

    assert members(wheel) == members(installed.wheel)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = subprocess.run(
        [str(installed.bin / "python"), "-m", "pip", "--python", str(venv / "bin" / "python"),
         "install", "--quiet", "--no-deps", str(wheel)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    assert {p.name for p in (venv / "bin").iterdir()} >= {"hive-office", "hive", "cth-hook"}
