"""`hive-office remote-setup HOST`: install this project's package into a venv on a host.

A wheel is built here from this very source tree (so the host runs exactly this
version), or, where hive-office was installed as a tool (pipx, uv, a wheel: no source
tree), packed again from the installed files. It is sent over one ssh call on its stdin,
and installed there with pip: first with its dependencies (from whatever package index
the host reaches), then once more with --no-deps --force-reinstall, so a venv that
already holds this version number gets these files. On the host only a temporary folder
of its own is removed; nothing else.
"""

from __future__ import annotations

import base64
import email
import hashlib
import importlib.metadata
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import msgspec

from hive_core.config import ConfigError, load_office
from hive_core.errors import OfficeError
from hive_core.paths import HivePaths
from hive_core.remote.check import version_of
from hive_core.remote.ssh import remote_path_word, ssh_argv
from hive_core.schema import AgentSpec, OfficeSettings

# Every line the script means is tagged: a login shell's rc files may print their own.
TAG = "hive-setup"
# Not part of the package, or not wanted in the copy the wheel is built from (caches,
# the venv, tools downloaded for tests).
SKIP_TOP = {".venv", ".git", ".tools", "tests", "bench", "snapshots", "build", "dist"}
# The id of the ssh ControlPath when no agent of the office sits on the host.
SETUP_ID = "remote-setup"
# Lines of the host's output kept for an error message (the person saw them all).
TAIL_LINES = 20


class SetupError(OfficeError):
    """remote-setup cannot go on; the message is a sentence saying what to do."""


@dataclass(frozen=True)
class Target:
    """Where and how to install: the host, its ssh options, the venv there, the Python."""

    host: str
    ssh_args: tuple[str, ...]
    venv: str
    python: str
    pip_args: tuple[str, ...]
    spec: AgentSpec


def source_tree() -> Path | None:
    """The source tree this package runs from (the folder holding pyproject.toml above
    hive_core), or None when it was installed from a wheel."""
    root = Path(__file__).resolve().parent.parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def _skipper(root: Path) -> Callable[[str, list[str]], set[str]]:
    def skip(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == root
        return {
            n
            for n in names
            if n == "__pycache__"
            or n.startswith(".")
            or n.endswith(".egg-info")
            or (top and n in SKIP_TOP)
        }

    return skip


def build_wheel(root: Path, out: Path, python: str = sys.executable) -> Path:
    """A wheel of the tree at `root`, built from a clean copy (no venv, caches or tests)
    into `out`; returns its path (its real name: pip reads the version from it)."""
    src = out / "src"
    shutil.copytree(root, src, ignore=_skipper(root))
    wheels = out / "wheels"
    done = subprocess.run(
        [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    built = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if done.returncode != 0 or len(built) != 1:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-TAIL_LINES:])
        raise SetupError(
            f"building the wheel of {root} failed (pip wheel exited {done.returncode}); "
            f"fix what pip said and run remote-setup again:\n{tail}"
        )
    return built[0]


# What an installer adds to a wheel's dist-info (and RECORD, written anew): not the wheel's.
INSTALLER_FILES = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def installed_wheel(out: Path) -> Path:
    """The wheel the installed hive-office came from, packed again from its installed files
    (its RECORD lists them) into `out`; returns its path."""
    dist = importlib.metadata.distribution("hive-office")
    members = [
        f
        for f in dist.files or []
        if f.parts[0] != ".."  # console scripts: the installer writes them from entry points
        and "__pycache__" not in f.parts
        and not (f.parts[0].endswith(".dist-info") and f.name in INSTALLER_FILES)
    ]
    info = next(f.parts[0] for f in members if f.parts[0].endswith(".dist-info"))
    tag = email.message_from_string(dist.read_text("WHEEL") or "")["Tag"] or "py3-none-any"
    path = out / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member in members:
            data = Path(member.locate()).read_bytes()
            wheel.writestr(str(member), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        wheel.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def this_wheel(out: Path, log: IO[str]) -> Path:
    """A wheel of the hive-office running here, in `out`: built from its source tree, or
    packed from its installed files where it has none."""
    root = source_tree()
    if root is None:
        log.write(
            f"packing the installed hive-office {importlib.metadata.version('hive-office')}\n"
        )
        log.flush()
        return installed_wheel(out)
    log.write(f"building the wheel of {root}\n")
    log.flush()
    return build_wheel(root, out)


def install_script(venv: str, python: str, pip_args: Sequence[str], wheel_name: str) -> str:
    """The sh script run on the host with the wheel on its stdin. Prints tagged lines:
    `step <what>` as it goes, `failed <step>` when one fails, `version <hive --version>`."""
    t = TAG
    pip = " ".join(shlex.quote(a) for a in pip_args)
    return f"""umask 077
step() {{ printf '{t}\\tstep\\t%s\\n' "$1"; }}
failed() {{ printf '{t}\\tfailed\\t%s\\n' "$1"; exit 3; }}
venv={remote_path_word(venv)}
python={shlex.quote(python)}
tmp=$(mktemp -d "${{TMPDIR:-/tmp}}/hive-office-setup.XXXXXX") || failed mktemp
trap 'rm -rf "$tmp"' EXIT
wheel="$tmp"/{shlex.quote(wheel_name)}
cat > "$wheel" || failed receive
if [ ! -x "$venv/bin/python" ]; then
  command -v "$python" >/dev/null 2>&1 || failed python
  step "created the venv $venv with $python"
  "$python" -m venv "$venv" >&2 || failed venv
fi
step "installing {wheel_name} and its dependencies into $venv"
"$venv/bin/python" -m pip install --disable-pip-version-check {pip} "$wheel" >&2 || failed pip-deps
step "reinstalled {wheel_name} over any copy of the same version"
"$venv/bin/python" -m pip install --disable-pip-version-check {pip} --no-deps --force-reinstall "$wheel" >&2 || failed pip
line=$("$venv/bin/hive" --version 2>&1 </dev/null) || failed hive
printf '{t}\\tversion\\t%s\\n' "$line"
"""


def failure_sentence(step: str, target: Target) -> str:
    """What to do when the script's `step` failed on the host (its output was shown)."""
    host, venv, python = target.host, target.venv, target.python
    sentences = {
        "mktemp": f"remote-setup could not make a temporary folder on {host}: check that "
        "$TMPDIR (or /tmp) there is writable and not full.",
        "receive": f"the wheel could not be written on {host}: check the free space in its "
        "$TMPDIR (or /tmp).",
        "python": f"there is no `{python}` on {host}: install Python 3.11 or newer "
        "there, or name one with --python.",
        "venv": f"`{python} -m venv {venv}` failed on {host} (its output is above): on "
        "Debian or Ubuntu install python3-venv there, or name another Python with --python.",
        "pip-deps": f"pip could not install hive-office and its dependencies on {host} (its "
        "output is above): check that the host reaches a package index, or pass pip options "
        "with --pip-arg (e.g. --pip-arg=--index-url=URL).",
        "pip": f"pip could not reinstall hive-office on {host} (its output is above).",
        "hive": f"hive-office is installed in {venv} on {host} but `hive --version` fails "
        "there (its output is above): see whether that venv's Python runs.",
    }
    return sentences.get(step, f"remote-setup failed on {host} at {step}.")


def resolve_target(
    paths: HivePaths,
    host: str,
    ssh_args: Sequence[str],
    venv: str | None,
    python: str,
    pip_args: Sequence[str],
) -> Target:
    """The target from the options, filling in what they leave out from office.toml (the
    first agent on `host` for ssh_args, `remote_venv`) when the home holds an office."""
    settings = OfficeSettings()
    agent: AgentSpec | None = None
    if paths.office_toml.exists():
        try:
            config = load_office(paths.office_toml)
        except ConfigError as e:
            raise SetupError(
                f"office.toml in {paths.home} is invalid ({e}); fix it, or give --venv and "
                "--ssh-arg and point --home elsewhere."
            ) from None
        settings = config.office
        agent = next((a for a in config.agents if a.host == host), None)
    args = list(ssh_args) if ssh_args else (list(agent.ssh_args) if agent else [])
    if agent is not None:
        spec = msgspec.structs.replace(agent, ssh_args=args)
    else:
        spec = AgentSpec(id=SETUP_ID, name=SETUP_ID, host=host, ssh_args=args)
    return Target(host, tuple(args), venv or settings.remote_venv, python, tuple(pip_args), spec)


def _relay(stream: IO[str], sink: IO[str], tail: deque[str]) -> None:
    for line in stream:
        sink.write(line)
        sink.flush()
        tail.append(line.rstrip("\n"))


def install(target: Target, wheel: Path, paths: HivePaths, log: IO[str]) -> str:
    """Send `wheel` to the host and install it there; returns the version installed. The
    host's own output (pip's) goes to `log` as it comes."""
    script = install_script(target.venv, target.python, target.pip_args, wheel.name)
    argv = ssh_argv(target.spec, paths, f"exec sh -c {shlex.quote(script)}", extra=("-T",))
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        with wheel.open("rb") as data:
            proc = subprocess.Popen(
                argv,
                stdin=data,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
    except FileNotFoundError:
        raise SetupError("there is no `ssh` here: install the OpenSSH client.") from None
    assert proc.stdout is not None and proc.stderr is not None
    relay = threading.Thread(target=_relay, args=(proc.stderr, log, tail), daemon=True)
    relay.start()
    version: str | None = None
    failed: str | None = None
    for line in proc.stdout:
        words = line.rstrip("\r\n").split("\t")
        if len(words) < 3 or words[0] != TAG:
            continue
        if words[1] == "step":
            log.write(f"{target.host}: {words[2]}\n")
            log.flush()
        elif words[1] == "failed":
            failed = words[2]
        elif words[1] == "version":
            version = version_of(words[2])
    code = proc.wait()
    relay.join()
    if failed is not None:
        raise SetupError(failure_sentence(failed, target))
    if code == 255:
        from hive_core.remote.check import classify_ssh_failure

        raise SetupError(classify_ssh_failure(target.host, "\n".join(tail)))
    if code != 0 or version is None:
        said = f": {tail[-1]}" if tail else ""
        raise SetupError(
            f"remote-setup on {target.host} ended without installing (exit {code}{said}); "
            "the host needs a POSIX sh, mktemp and a Python with venv."
        )
    return version


def remote_setup(
    paths: HivePaths,
    host: str,
    *,
    ssh_args: Sequence[str] = (),
    venv: str | None = None,
    python: str = "python3",
    pip_args: Sequence[str] = (),
    log: IO[str] = sys.stderr,
) -> tuple[Target, str]:
    """Build the wheel here and install it on `host`; returns the target and the version
    now installed there. Raises SetupError (a sentence) when it cannot."""
    target = resolve_target(paths, host, ssh_args, venv, python, pip_args)
    with tempfile.TemporaryDirectory(prefix="hive-office-wheel-") as out:
        wheel = this_wheel(Path(out), log)
        log.write(f"built {wheel.name}; sending it to {host}\n")
        log.flush()
        return target, install(target, wheel, paths, log)
