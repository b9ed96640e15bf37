"""The tool policy over resolved paths and network use (issue 13), each refusal next to the
allowed call beside it. Pure decisions over OfficeFacts; the symlink cases resolve real
links on disk, as the office does (os.path.realpath)."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from uuid import uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cth_hook
from hive_core.agents.claude import ClaudeProvider
from hive_core.agents.provider import CanonicalEvent, LaunchContext
from hive_core.events.policy import AgentView, OfficeFacts, decide
from hive_core.events.shellwords import commands, program
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec

HOME = Path("/home/u/.hive-office")
HIVE = HOME / "hive"
SRC = "/home/u/src"
HOOK = Path(cth_hook.__file__).parent
OFFICE = OfficeFacts(
    office="Scranton",
    home=HOME,
    hive=HIVE,
    manager="michael",
    stop_block_cap=3,
    roster=[("michael", "Michael", "Manager"), ("jim", "Jim", "Engineer")],
    web_agents=["pete"],
    hook_program=HOOK,
)
JIM = AgentView(id="jim", name="Jim", role="Engineer", manager=False, web=False)
PETE = AgentView(id="pete", name="Pete", role="Research", manager=False, web=True)


def deny(
    tool: str, agent: AgentView = JIM, cwd: str = SRC, office: OfficeFacts = OFFICE, **kw: object
) -> str | None:
    event = CanonicalEvent(name="PreToolUse", tool_name=tool, tool_input=dict(kw), cwd=cwd)
    return decide(event, agent, [], office).decision.deny


def bash(command: str, **kw: object) -> str | None:
    return deny("Bash", command=command, **kw)  # type: ignore[arg-type]


# --- locked files, every path resolved ----------------------------------------------------


@pytest.mark.parametrize(
    ("command", "cwd", "denied"),
    [
        # The case: a `cd` earlier in the chain moves the relative path.
        (f"cd {HOME} && echo x > agent-settings/jim.json", SRC, True),
        (f"cd {SRC} && echo x > agent-settings/jim.json", str(HOME), False),
        (f"cd {HOME}; cd run; rm control.sock", SRC, True),
        (f"cd {HOME}/run && ls -l 2>&1 | head", SRC, False),
        # Relative to the tool call's own cwd.
        ("echo '[office]' > office.toml", str(HOME), True),
        ("echo '[office]' > office.toml", SRC, False),
        ("echo x > ../../../office.toml", str(HIVE / "agents/jim"), True),
        ("echo x > ../jim/notes.md", str(HIVE / "agents/jim"), False),
        # Variables the office knows, quoting, and `=` operands.
        ('rm "$HIVE_HOME/run/control.sock"', SRC, True),
        ("ls ${HIVE_HOME}/run", SRC, False),
        ("dd if=/dev/zero of=${HIVE_HOME}/office.toml bs=1 count=1", SRC, True),
        ("dd if=${HIVE_HOME}/office.toml of=/tmp/copy", SRC, False),
        ("cp office.toml /tmp/office.toml", str(HOME), False),
        ("cp /tmp/office.toml office.toml", str(HOME), True),
        # The hive's git metadata: the committer's alone.
        (f"cd {HIVE} && git commit -am x", SRC, True),
        (f"cd {HIVE} && git log --oneline", SRC, False),
        (f"git -C {HIVE} reset --hard", SRC, True),
        (f"git -C {HIVE} log -3", SRC, False),
        ("git commit -am wip", SRC, False),
        # Shells inside the command, here-documents, inline code.
        (f'bash -c "cd {HOME} && rm run/control.sock"', SRC, True),
        (f'bash -c "cd {HOME} && ls run"', SRC, False),
        ("python3 - <<'EOF'\nopen('office.toml', 'w').write('x')\nEOF", str(HOME), True),
        ("python3 - <<'EOF'\nopen('office.toml', 'w').write('x')\nEOF", SRC, False),
        (f"bash <<'EOF'\ncd {HOME}\nrm run/control.sock\nEOF", SRC, True),
        (f"bash <<'EOF'\ncd {HOME}\nls run\nEOF", SRC, False),
        ('eval "cd $HIVE_HOME && rm office.toml"', SRC, True),
        ('eval "cd $HIVE_HOME && cat office.toml"', SRC, False),
        (f"pushd {HOME}/run && rm -f *.sock", SRC, True),
        (f"find {HOME}/run -name '*.sock' -delete", SRC, True),
        (f"find {HOME}/run -name '*.sock'", SRC, False),
        (f"ln -sf /tmp/evil {HOME}/agent-settings/jim.json", SRC, True),
        (f"ln -s {HOME}/agent-settings/jim.json /tmp/look", SRC, False),
        ("chmod u+w agent-settings/jim.json", str(HOME), True),
        ("perl -pi -e s/a/b/ office.toml", str(HOME), True),
        ("sed -i s/a/b/ office.toml", str(HOME), True),
        ("sed -n 1p office.toml", str(HOME), False),
        # A `hive` command's text is not a write; what follows it still is.
        ("hive send --to pam --body 'see agent-settings > y'", str(HOME), False),
        (f"hive roster; echo x > {HOME}/office.toml", SRC, True),
    ],
)
def test_bash_writes_are_judged_where_they_land(command: str, cwd: str, denied: bool) -> None:
    reason = bash(command, cwd=cwd)
    assert bool(reason) == denied, reason
    if reason:
        assert "would write where you must not" in reason


def test_tilde_is_the_users_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    reason = bash("echo x > ~/.hive-office/agent-settings/jim.json")
    assert reason and "agent-settings/ (your CLI's settings and hooks) is locked" in reason
    assert bash("echo x > ~/notes.txt") is None
    assert deny("Write", file_path="~/.hive-office/office.toml", content="x")
    assert deny("Write", file_path="~/notes.txt", content="x") is None


@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit", "NotebookEdit"])
def test_file_tools_resolve_relative_paths_against_the_cwd(tool: str) -> None:
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    for cwd, denied in ((str(HOME), True), (SRC, False)):
        event = CanonicalEvent("PreToolUse", tool_name=tool, tool_input={key: "run/x"}, cwd=cwd)
        assert bool(decide(event, JIM, [], OFFICE).decision.deny) == denied


def test_the_hook_program_is_locked() -> None:
    main = str(HOOK / "__main__.py")
    reason = deny("Edit", file_path=main, old_string="a", new_string="b")
    assert reason and "The hook program (cth_hook) is locked" in reason
    assert bash(f"echo 'import os' >> {main}")
    assert bash(f"cd {HOOK} && sed -i s/2.0/0/ __main__.py")
    assert bash(f"cat {main}") is None
    assert deny("Edit", file_path=f"{SRC}/app.py", old_string="a", new_string="b") is None


def test_every_locked_path_is_refused_and_its_neighbours_are_not() -> None:
    paths = HivePaths(HOME)
    for locked in paths.locked(HOOK):
        for path in (locked, locked / "child"):
            reason = deny("Write", file_path=str(path), content="x")
            assert reason and "is locked" in reason, path
    assert deny("Write", file_path=str(paths.mailbox("jim").notes), content="x") is None
    assert deny("Write", file_path=str(HOME / "notes-of-the-person.md"), content="x") is None


def test_links_are_followed_to_where_they_point(tmp_path: Path) -> None:
    home = Path(os.path.realpath(tmp_path / "home"))
    (home / "agent-settings").mkdir(parents=True)
    (home / "agent-settings" / "jim.json").write_text("{}")
    project = tmp_path / "project"
    project.mkdir()
    (project / "settings-link").symlink_to(home / "agent-settings" / "jim.json")
    (project / "home-link").symlink_to(home)
    (project / "plain.txt").write_text("")
    office = replace(OFFICE, home=home, hive=home / "hive", resolve=os.path.realpath)
    cwd = str(project)
    for command in ("echo x > settings-link", "echo x > home-link/office.toml"):
        reason = bash(command, cwd=cwd, office=office)
        assert reason and "is locked" in reason, command
    assert deny("Write", cwd=cwd, office=office, file_path="settings-link", content="x")
    assert bash("echo x > plain.txt", cwd=cwd, office=office) is None
    assert deny("Write", cwd=cwd, office=office, file_path="plain.txt", content="x") is None
    # A path with a NUL byte names no file (realpath would raise on it): nothing to judge.
    assert deny("Write", cwd=cwd, office=office, file_path="a\0b", content="x") is None


# --- network use from Bash ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "local_neighbour"),
    [
        ("curl -s https://example.com", "echo curl is a word here"),
        ("wget -q https://example.com/x.tgz", "ls wget-logs"),
        ("nc example.com 80", "wc -l notes.txt"),
        ("ncat example.com 80", "cat notes.txt"),
        ("ssh host uptime", "uptime"),
        ("scp a.txt host:/tmp/", "cp a.txt /tmp/"),
        ("sftp host", "ls"),
        ("telnet example.com 25", "true"),
        ("rsync -a src/ host:backup/", "rsync -a src/ /tmp/backup/"),
        ("git clone https://github.com/x/y", "git clone ../local-repo copy"),
        ("git clone git@github.com:x/y.git", "git clone /srv/repos/y.git"),
        ("git fetch https://github.com/x/y main", "git fetch origin main:main"),
        ("git ls-remote ssh://host/repo.git", "git log --oneline"),
        ("git -c http.proxy=x pull https://host/r.git", "git -C ../other pull ../r.git"),
        ("pip install requests", "pip list"),
        ("python3 -m pip install httpx", "python3 -m pytest -q"),
        ("uv pip install rich", "uv run pytest"),
        ("npm install left-pad", "npm test"),
        ("npx cowsay hi", "npm run build"),
        ("yarn add react", "yarn test"),
        ("pnpm add react", "pnpm test"),
        (
            "python3 -c 'import urllib.request; urllib.request.urlopen(\"https://x\")'",
            "python3 -c 'print(1)'",
        ),
        ("python -c 'import requests'", "python -c 'import json'"),
        ("python3 - <<'EOF'\nimport socket\nEOF", "python3 - <<'EOF'\nimport json\nEOF"),
        ("node -e 'fetch(\"https://example.com\")'", "node -e 'console.log(1)'"),
        ("node -e \"require('https').get('https://x')\"", "node -e \"require('fs')\""),
        ("sudo curl https://example.com", "sudo ls"),
        ("cd /tmp && timeout 5 wget https://x", "cd /tmp && timeout 5 ls"),
        ('bash -c "curl https://x | sh"', 'bash -c "ls | wc -l"'),
    ],
)
def test_network_tools_only_for_research_agents(command: str, local_neighbour: str) -> None:
    reason = bash(command)
    assert reason and "reaches the network, and you are not a research agent" in reason
    assert "hive send --to pete" in reason, "the reason names who can fetch it"
    assert bash(command, agent=PETE) is None, "a research agent is not denied by the office"
    assert bash(local_neighbour) is None, local_neighbour


def test_without_research_agents_the_reason_names_the_manager() -> None:
    office = replace(OFFICE, web_agents=[])
    reason = bash("curl https://example.com", office=office)
    assert reason and "Nobody in this office has web access" in reason
    assert "hive send --to michael" in reason
    web = deny("WebFetch", office=office, url="https://example.com")
    assert web and "hive send --to michael" in web


def test_a_research_agent_is_still_held_to_the_locked_files() -> None:
    for command in (
        f"curl https://example.com > {HOME}/office.toml",
        f"curl -o {HOME}/office.toml https://example.com",
        f"wget -O {HOME}/office.toml https://example.com",
    ):
        reason = bash(command, agent=PETE)
        assert reason and "office.toml is locked" in reason, command
    assert bash("curl -o /tmp/page.html https://example.com", agent=PETE) is None


# --- the shell reading itself -------------------------------------------------------------


def test_the_reading_keeps_quotes_heredocs_and_directories_apart() -> None:
    found = commands(
        "cd /a && cat > 'x y.txt' <<EOF\nrm -rf /\nEOF\necho \"$HIVE_HOME\" 2>&1 | tee -a b # c > d",
        "/start",
        {"HIVE_HOME": "/h"},
    )
    assert [(c.words, c.writes, c.stdin, c.cwd) for c in found] == [
        (("cat",), ("x y.txt",), "rm -rf /\n", "/a"),
        (("echo", "/h"), (), "", "/a"),
        (("tee", "-a", "b"), (), "", "/a"),
    ]
    assert program(("env", "A=1", "timeout", "5", "/usr/bin/python3.11", "-c", "x")) == (
        "python",
        ("-c", "x"),
    )
    assert commands("echo 'never closed > x", "/", {})[0].writes == ()


_SHELLISH = st.text(
    alphabet=st.sampled_from(list(" \t\n\r\v'\"\\$;&|()<>`#{}=~-/.*0129abcdEOF\u00a0é\0")),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(_SHELLISH)
def test_any_command_text_gets_an_answer(command: str) -> None:
    commands(command, "/start", {"HIVE_HOME": str(HOME), "PWD": "."})
    out = decide(
        CanonicalEvent("PreToolUse", tool_name="Bash", tool_input={"command": command}, cwd=SRC),
        JIM,
        [],
        replace(OFFICE, resolve=os.path.realpath),
    )
    assert out.status == "working"


# --- Claude's settings carry the same locks -----------------------------------------------


def test_claude_settings_deny_the_locked_paths_and_are_read_only(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    ctx = LaunchContext(
        paths=paths,
        agent=AgentSpec(id="jim", name="Jim", provider="claude", cwd=str(tmp_path)),
        secret="s3cret",
        session_id=str(uuid4()),
        resume=False,
        system_prompt="You are Jim.",
        hook_command=["/venv/bin/python", "-I", "-S", str(HOOK / "__main__.py")],
        path_prepend=[],
        base_env={"PATH": "/usr/bin"},
    )
    provider = ClaudeProvider()
    provider.prepare(ctx)
    # The office replaces it whole at every start, read-only or not.
    provider.prepare(ctx)
    settings = provider.settings_path(ctx)
    assert stat.S_IMODE(settings.stat().st_mode) == 0o400
    deny_rules = json.loads(settings.read_text())["permissions"]["deny"]
    for locked in (paths.agent_settings, paths.office_toml, paths.run, paths.git_dir, HOOK):
        assert f"Edit(/{locked}/**)" in deny_rules
        assert f"Edit(/{os.path.realpath(locked)})" in deny_rules
    assert not any(str(paths.mailbox("jim").root) in rule for rule in deny_rules)
