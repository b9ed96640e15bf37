"""Issue 23, a first start without a login, with the real claude CLI and the app in a real
tmux. A home with no Claude login and no key: one sentence on screen says what to do,
the manager's desk is the one started (the person logs in there), the other claude desks
wait in their panes instead of failing, doctor fails with the same advice, and no desk is
started again and again. Once the login is there (written as /login writes it), the
others still wait for Claude Code's trust question, which the person answers once in
the manager's pane; then they start by themselves, on the shared login and the shared
answer, without a question of their own. With a key the person approved, every desk
starts at once.

Nothing leaves the machine: every desk's ANTHROPIC_BASE_URL is a scripted model on
127.0.0.1, and this sandbox has no route out (Claude Code's first-run screen then ends at
its connectivity check; the test allows for either)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from hive_core.demo.scripted_model import Scenario, ScriptedModel
from hive_core.desks.supervisor import NO_LOGIN_HINT
from tests.claude_office import API_KEY, BIN, CLAUDE, make_claude_office, serving
from tests.support import short_dir, wait_for
from tests.tmux_support import PREFIX_KEY, Tmux, row_text, tmux_env

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CLAUDE is None, reason="claude CLI not found (run scripts/setup)"),
]

TEAM = (("michael", "Michael"), ("jim", "Jim"), ("pam", "Pam"), ("dwight", "Dwight"))
FOLLOWERS = [a for a, _ in TEAM[1:]]
SENTENCE = "No Claude login: log in once in Michael's pane (/login; the other claude desks follow)"
WAITING = "Waiting for a Claude login in Michael's pane; this desk starts by itself after."


def log_of(home: Path) -> list[dict[str, str]]:
    path = home / "hive" / "log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def starts(home: Path, agent: str) -> int:
    """How many times the office spawned the agent's CLI."""
    return sum(
        1
        for e in log_of(home)
        if e.get("agent") == agent and str(e.get("detail", "")).startswith("started ")
    )


def details(home: Path, agent: str) -> str:
    return "\n".join(str(e.get("detail", "")) for e in log_of(home) if e.get("agent") == agent)


def registry(home: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads((home / "hive" / "registry.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {a["id"]: a for a in data["agents"]}


def screen_text(tmux: Tmux) -> str:
    return "\n".join(row_text(r) for r in tmux.capture("office"))


def joined(text: str) -> str:
    """The screen's words in one run: a sentence the app wraps reads whole."""
    return " ".join(text.split())


def test_no_login_one_sentence_followers_wait_then_start_on_the_login() -> None:
    # A short home (a person's is ~/.hive-office): the sentence names its office.toml.
    with short_dir() as root:
        no_login_then_login(root)


def no_login_then_login(root: Path) -> None:
    project = root / "project"
    project.mkdir()
    model = ScriptedModel(Scenario([], fallback="Noted."))
    model.start()
    home = root / "office"
    home.mkdir()
    roster = '[office]\nmanager = "michael"\n' + "".join(
        f'\n[[agents]]\nid = "{a}"\nname = "{name}"\nrole = "Engineer"\nprovider = "claude"\n'
        f'cwd = "{project}"\nenv = {{ ANTHROPIC_BASE_URL = "{model.base_url}", '
        'DISABLE_TELEMETRY = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" }\n'
        for a, name in TEAM
    )
    (home / "office.toml").write_text(roster)
    # HOME is the test's folder: no Claude login, no key, nothing of the caller's.
    env = tmux_env(root)
    env["PATH"] = f"{BIN}:{env['PATH']}"
    subprocess.run(
        [str(BIN / "hive-office"), "init", "--home", str(home)],
        env=env,
        check=True,
        capture_output=True,
    )
    tmux = Tmux(root, env)
    app = [str(BIN / "hive-office"), "--home", str(home)]
    tmux(
        "new-session",
        "-d",
        "-s",
        "office",
        "-x",
        "160",
        "-y",
        "48",
        "-c",
        str(root),
        shlex.join(app),
    )
    try:
        # One sentence says what to do, once: no pop-up repeats it, no desk's line.
        wait_for(lambda: SENTENCE in joined(screen_text(tmux)), "the login sentence on screen", 60)
        # The manager was started (its pane is where the person logs in); the others wait.
        # Here its first-run screen ends at the connectivity check (no route out), and
        # it says only that it waits for the login too.
        wait_for(lambda: log_of(home) and registry(home).get("michael"), "the registry", 30)
        wait_for(
            lambda: (
                registry(home)["michael"]["pid"] or "could not start" in details(home, "michael")
            ),
            "the manager running its first-run screen, or exited at its connectivity check",
            60,
        )
        text = joined(screen_text(tmux))
        assert text.count(SENTENCE) == 1, text
        assert text.count("exited right after it started") <= 1, text
        assert starts(home, "michael") == 1
        reg = registry(home)
        for agent in FOLLOWERS:
            assert starts(home, agent) == 0
            assert reg[agent]["pid"] is None, reg[agent]
            assert reg[agent]["status"] != "exited", reg[agent]
        # A waiting desk's pane says so (the prefix, 2: Jim's pane).
        tmux("send-keys", "-t", "office", PREFIX_KEY, "2")
        wait_for(lambda: WAITING in joined(screen_text(tmux)), "Jim's pane saying it waits", 30)
        # At 80x24 the whole sentence is still there, once, inside the screen.
        tmux("resize-window", "-t", "office", "-x", "80", "-y", "24")
        whole = (
            f"{SENTENCE}, or try `hive-office --demo`, or use shell desks "
            f'(provider = "shell" in {home}/office.toml).'
        )
        wait_for(lambda: whole in joined(screen_text(tmux)), "the whole sentence at 80x24", 30)
        assert joined(screen_text(tmux)).count(SENTENCE) == 1

        # As after scripts/setup: the venv's bin is not on PATH, so the hint names the
        # pinned claude by its path.
        doctor = subprocess.run(
            [str(BIN / "hive-office"), "doctor", "--home", str(home)],
            env={**env, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
        )
        assert doctor.returncode == 1, doctor.stdout
        assert "FIX  michael, jim, pam, dwight: no Claude login" in doctor.stdout
        assert f"run `{BIN / 'claude'}` and type /login" in doctor.stdout
        assert f"`hive-office --home {home}`" in doctor.stdout

        # The person logs in once (a Console login: /login keeps the key in the global
        # config, with the first run done). The others still wait: Claude Code's trust
        # question for the project is open in Michael's pane, and theirs would be too.
        config = {"hasCompletedOnboarding": True, "primaryApiKey": API_KEY}
        (root / ".claude.json").write_text(json.dumps(config))
        trust = (
            f"Claude Code asks whether to trust {project.resolve()} once, in Michael's pane: "
            "answer it there and the other claude desks start by themselves."
        )
        wait_for(lambda: trust in joined(screen_text(tmux)), "the trust line", 60)
        assert [starts(home, a) for a in FOLLOWERS] == [0, 0, 0]
        restarted = NO_LOGIN_HINT in details(home, "michael")
        if restarted:
            # The manager had exited for want of the login: it was started again, and
            # its pane asks; the person answers there, and Claude Code records it.
            tmux("send-keys", "-t", "office", PREFIX_KEY, "1")
            wait_for(
                lambda: "Yes, I trust this folder" in screen_text(tmux),
                "the trust question in Michael's pane",
                60,
            )
            tmux("send-keys", "-t", "office", "Enter")
        else:  # it is still on its own first-run screen: answered as it would record it
            config["projects"] = {str(project.resolve()): {"hasTrustDialogAccepted": True}}
            (root / ".claude.json").write_text(json.dumps(config))
        wait_for(
            lambda: all(registry(home).get(a, {}).get("session_id") for a in FOLLOWERS),
            "the waiting desks to start on the shared login and reach SessionStart",
            90,
        )
        wait_for(
            lambda: "⚠ login:" not in joined(screen_text(tmux)),
            "the login line to clear",
            30,
        )
        # Each desk was started once, the manager once more if it had exited for want of
        # the login (here: at its connectivity check): none in a loop.
        again = int(NO_LOGIN_HINT in details(home, "michael"))
        wait_for(lambda: registry(home)["michael"]["session_id"], "the manager's session", 60)
        assert [starts(home, a) for a, _ in TEAM] == [1 + again, 1, 1, 1]
        if restarted:  # the answer the person gave in Michael's pane, as Claude Code kept it
            kept = json.loads((root / ".claude.json").read_text())
            assert kept["projects"][str(project.resolve())]["hasTrustDialogAccepted"] is True
        # The desks that followed used the key the login stored, at the scripted model.
        assert model.requests, "no request reached the scripted model"
    finally:
        subprocess.run(
            [str(BIN / "hive-office"), "stop", "--home", str(home)], env=env, capture_output=True
        )
        tmux.kill()
        model.stop()


def test_with_a_key_every_desk_starts(tmp_path: Path) -> None:
    office = make_claude_office(tmp_path, {}, agents=[a for a, _ in TEAM])
    doctor = office.run("hive-office", "doctor", "--home", str(office.home), check=False)
    assert doctor.returncode == 0 or "no Claude login" not in doctor.stdout, doctor.stdout
    assert "michael, jim, pam, dwight: Claude login ANTHROPIC_API_KEY" in doctor.stdout
    with serving(office, tmp_path / "serve.log"):
        reg = office.registry()
        assert all(reg[a]["pid"] for a, _ in TEAM), reg
        assert [starts(office.home, a) for a, _ in TEAM] == [1, 1, 1, 1]
        health = json.loads((office.home / "run" / "health.json").read_text())
        assert not [p for p in health["problems"] if p["component"] == "login"], health
