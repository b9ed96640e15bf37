"""A remote desk's launch and reconnects, pure (hive_core/remote/plan.py), and what the
explained status and the wake path make of a disconnected desk."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

import pytest

from hive_core.agents.identity import system_prompt
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.remote.ssh import ssh_argv
from hive_core.schema import AgentSpec, MailItem, OfficeConfig, OfficeSettings
from hive_core.status import LinkDown, Signals, explain
from hive_core.team.wake import DISCONNECTED, WakeMemory, WakeView, decide_wake

HOME = Path("/srv/office")
RDIR = "/home/u/.hive-remote/abcd1234/desks/jim"


def test_office_key_is_the_home_digest() -> None:
    assert plan.office_key(HOME) == hashlib.sha256(b"/srv/office").hexdigest()[:8]
    assert plan.office_key(HOME) != plan.office_key(Path("/srv/other"))
    assert plan.rdir_of("/home/u/", "abcd1234", "jim") == RDIR


def test_prepare_is_private_removes_stale_sockets_and_prints_home() -> None:
    command = plan.prepare_command("abcd1234", "jim")
    assert command.startswith("umask 077 && mkdir -p ")
    assert '"$HOME"/.hive-remote/abcd1234/desks/jim/hook.sock' in command
    assert '"$HOME"/.hive-remote/abcd1234/desks/jim/control.sock' in command
    # The launch script (every value of the start) arrives on stdin into a file of the
    # private folder, never in an argv.
    assert 'cat > "$HOME"/.hive-remote/abcd1234/desks/jim/launch.sh &&' in command
    assert command.endswith(plan.HOME_COMMAND)
    assert plan.HOME_COMMAND == "printf '%s\\n' \"$HOME\""


def test_parse_home_takes_the_last_absolute_line() -> None:
    assert plan.parse_home("Welcome!\n/home/u\n") == "/home/u"
    assert plan.parse_home("") is None
    assert plan.parse_home("not a path\n") is None


def test_remote_venv_bin_is_absolute_from_the_remote_home() -> None:
    assert plan.remote_venv_bin("~/.local/v", "/home/u") == "/home/u/.local/v/bin"
    assert plan.remote_venv_bin("/opt/v/", "/home/u") == "/opt/v/bin"
    assert plan.remote_venv_bin("~", "/home/u") == "/home/u/bin"


def test_remote_env_is_what_the_office_added_plus_the_sockets() -> None:
    office = {"HOME": "/root", "LANG": "C", "TERM": "xterm-256color", "PATH": "/usr/bin"}
    launch = {
        **office,
        "HIVE_HOME": "/srv/office",
        "HIVE_AGENT_ID": "jim",
        "HIVE_SECRET": "s3",
        "HIVE_SOCKET": "/srv/office/run/hook.sock",
        "COLORTERM": "truecolor",
        "PATH": "/home/u/v/bin:/usr/bin",
        "LANG": "en_GB.UTF-8",  # the roster's env changed it
    }
    env = plan.remote_env(launch, office, RDIR)
    assert env == {
        "HIVE_AGENT_ID": "jim",
        "HIVE_SECRET": "s3",  # in the launch script, as every value (never in an argv)
        "TERM": "xterm-256color",  # always: the pane's terminal, not the office's
        "COLORTERM": "truecolor",
        "LANG": "en_GB.UTF-8",
        "HIVE_SOCKET": f"{RDIR}/hook.sock",
        "HIVE_CONTROL": f"{RDIR}/control.sock",
        "HIVE_REMOTE": "1",
    }


def test_remote_env_keeps_what_office_toml_names_even_where_the_office_has_it_too() -> None:
    office = {"HOME": "/root", "ANTHROPIC_API_KEY": "k", "TERM": "xterm"}
    launch = {**office, "HIVE_AGENT_ID": "jim"}
    assert "ANTHROPIC_API_KEY" not in plan.remote_env(launch, office, RDIR)
    named = plan.remote_env(launch, office, RDIR, {"ANTHROPIC_API_KEY": "k"})
    assert named["ANTHROPIC_API_KEY"] == "k" and "HOME" not in named


def test_named_files_finds_whole_words_and_option_values_under_the_home() -> None:
    words = [
        "claude",
        "--settings",
        "/srv/office/agent-settings/jim.json",
        "--mcp-config=/srv/office/agent-settings/jim.mcp.json",
        "--append-system-prompt",
        "You are jim. Your home is /srv/office/x",  # text, not a path
        "/srv/officeX/not-under",
        "/srv/office/agent-settings/jim.json",
    ]
    assert plan.named_files(words, HOME) == [
        "/srv/office/agent-settings/jim.json",
        "/srv/office/agent-settings/jim.mcp.json",
    ]


def test_ship_plan_places_files_under_rdir_and_refuses_too_much() -> None:
    shipped = plan.ship_plan({"/srv/office/a/b.json": b'{"x": 1}'}, HOME, RDIR)
    assert shipped == [plan.Shipped("/srv/office/a/b.json", f"{RDIR}/files/a/b.json", '{"x": 1}')]
    with pytest.raises(plan.ShipError, match="KiB"):
        plan.ship_plan({"/srv/office/big": b"x" * (plan.SHIP_MAX + 1)}, HOME, RDIR)
    with pytest.raises(plan.ShipError, match="not a text file"):
        plan.ship_plan({"/srv/office/bin": b"a\0b"}, HOME, RDIR)


def test_rewrite_replaces_the_longest_shipped_path_first() -> None:
    shipped = [
        plan.Shipped("/srv/office/c", f"{RDIR}/files/c", ""),
        plan.Shipped("/srv/office/c/config.toml", f"{RDIR}/files/c/config.toml", ""),
    ]
    assert plan.rewrite("--x=/srv/office/c/config.toml", shipped) == (
        f"--x={RDIR}/files/c/config.toml"
    )
    assert plan.rewrite("/srv/office/other", shipped) == "/srv/office/other"


def commands(script: str) -> list[list[str]]:
    """The launch script read back as a POSIX shell reads it: its `&&`-joined commands,
    each as its words."""
    found: list[list[str]] = [[]]
    for word in shlex.split(script):
        if word == "&&":
            found.append([])
        else:
            found[-1].append(word)
    return found


HOSTILE = "it's $HOME `x` \"q\"\nline2 \\ '' $(id) %s"


def test_remote_start_keeps_every_value_out_of_the_command_and_in_the_script() -> None:
    content = HOSTILE + " file-text-7c1e"
    shipped = [plan.Shipped("/srv/office/s.json", f"{RDIR}/files/s.json", content)]
    env = {
        "OPENAI_API_KEY": "sk-value-91ab",
        "G": HOSTILE,
        "F": "/srv/office/s.json",
        "HIVE_SECRET": "secret-d00d",
    }
    argv = ["claude", "--settings", "/srv/office/s.json", "--append-system-prompt", "a 'b' $c"]
    start = plan.remote_start(argv, env, RDIR, "~/work dir", shipped, "/home/u/v/bin")
    script = f"{RDIR}/launch.sh"
    # The command, an argv on both machines, is names, paths and the CLI's argv alone.
    assert shlex.split(start.command) == [
        "umask", "077", "&&", ".", script, "&&", "cd", "$HOME/work dir", "&&", "exec",
        "claude", "--settings", f"{RDIR}/files/s.json", "--append-system-prompt", "a 'b' $c",
    ]  # fmt: skip
    assert '"$HOME"/' in start.command  # ~ left for the remote shell: "$HOME"/'work dir'
    for value in ("sk-value-91ab", "file-text-7c1e", "secret-d00d", "line2", "$(id)"):
        assert value not in start.command
    # The script, read back: it removes itself first, writes the shipped file with a
    # builtin (no argv), exports every variable with its value (the shipped path
    # rewritten to its place there), and puts the remote venv first on the host's PATH.
    assert commands(start.script) == [
        ["rm", "-f", script],
        ["mkdir", "-p", f"{RDIR}/files"],
        ["printf", "%s", content, ">", f"{RDIR}/files/s.json"],
        ["export", "OPENAI_API_KEY=sk-value-91ab"],
        ["export", f"G={HOSTILE}"],
        ["export", f"F={RDIR}/files/s.json"],
        ["export", "HIVE_SECRET=secret-d00d"],
        ["export", "PATH=/home/u/v/bin:$PATH"],  # $PATH expanded there
    ]
    assert start.script.endswith('export PATH=/home/u/v/bin:"$PATH"\n')


def test_a_name_no_shell_can_export_is_refused_with_a_sentence() -> None:
    with pytest.raises(plan.ShipError, match="not a variable name"):
        plan.remote_start(["sh"], {"A-B": "x"}, RDIR, "/w", [], "/v/bin")
    start = plan.remote_start(["sh"], {"A_B": "x"}, RDIR, "/w", [], "/v/bin")
    assert commands(start.script)[1] == ["export", "A_B=x"]


def test_main_extra_forwards_both_sockets_and_fails_without_them() -> None:
    extra = plan.main_extra(RDIR, "/o/run/ssh/jim.log", "/o/h.sock", "/o/c.sock")
    assert extra[0] == "-tt"
    assert "ExitOnForwardFailure=yes" in extra
    assert extra[extra.index("-E") + 1] == "/o/run/ssh/jim.log"
    forwards = [extra[i + 1] for i, w in enumerate(extra) if w == "-R"]
    assert forwards == [f"{RDIR}/hook.sock:/o/h.sock", f"{RDIR}/control.sock:/o/c.sock"]


def test_link_reason_is_the_last_meaningful_log_line() -> None:
    log = "Warning: Permanently added 'x' to known hosts.\nClient_loop: send disconnect: Broken pipe\n\n"
    assert plan.link_reason(log, "fallback") == "Client_loop: send disconnect: Broken pipe"
    assert plan.link_reason("", "ssh exited") == "ssh exited"


@pytest.mark.parametrize(
    ("failures", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 60.0), (500, 60.0)]
)
def test_backoff_doubles_to_a_cap(failures: int, delay: float) -> None:
    assert plan.reconnect_plan(failures, told=False).delay == delay


def test_the_manager_is_told_once_after_three_failures() -> None:
    assert not plan.reconnect_plan(1, told=False).tell
    assert not plan.reconnect_plan(2, told=False).tell
    assert plan.reconnect_plan(3, told=False).tell
    assert plan.reconnect_plan(9, told=False).tell  # not told yet (a new spell): tell
    assert not plan.reconnect_plan(4, told=True).tell
    subject, text = plan.tell_text("box", "jim", 3, "Connection refused")
    assert subject == "box is unreachable"
    assert "jim" in text and "Connection refused" in text and "3 attempts" in text


def test_explain_disconnected_says_why_and_when_it_retries() -> None:
    link = LinkDown(reason="Connection reset by peer", at=0.0, failures=3, delay=4.0)
    s = Signals(id="jim", status="disconnected", link=link, unread=2)
    status = explain(s, 10.0)
    assert status.kind == "disconnected"
    assert "Connection reset by peer" in status.why
    assert "2 messages unread wait" in status.why
    assert status.evidence == "ssh link lost at 00:00:00Z (attempt 3); reconnecting in 4 s"
    stopped = LinkDown(reason="r", at=0.0, delay=None, stopped="the person paused it")
    status = explain(Signals(id="jim", status="disconnected", link=stopped), 10.0)
    assert "does not reconnect it (the person paused it)" in status.why
    assert "hive-office spawn jim" in status.why
    assert status.evidence.endswith("not reconnecting")
    # Before the office knows why (no link signal), still disconnected, not "offline".
    assert explain(Signals(id="jim", status="disconnected"), 1.0).kind == "disconnected"


def test_wake_path_types_nothing_into_a_disconnected_desk() -> None:
    view = WakeView(
        id="jim",
        status="disconnected",
        quiet_for=100.0,
        unread=(MailItem(id="m1", sender="pam", act="inform", subject="hi"),),
    )
    decision = decide_wake(view, WakeMemory(), 100.0)
    assert decision.nudge is None
    assert decision.hold == DISCONNECTED


def test_a_launch_longer_than_one_argv_string_is_refused_with_a_sentence() -> None:
    ok = plan.remote_start(["claude", "x" * 1000], {"K": "y" * 1000}, RDIR, "/w", [], "/v/bin")
    assert ok.command.endswith("x" * 1000)
    with pytest.raises(plan.ShipError, match="more than the 120 KiB"):
        plan.remote_start(["claude", "x" * plan.COMMAND_MAX], {}, RDIR, "/w", [], "/v/bin")
    # The environment the CLI is exec'd with counts too, though it is not in the command.
    with pytest.raises(plan.ShipError, match="more than the 120 KiB"):
        plan.remote_start(["claude"], {"K": "y" * plan.COMMAND_MAX}, RDIR, "/w", [], "/v/bin")


def test_a_remote_desk_s_prompt_names_no_office_path_and_points_at_hive() -> None:
    here = AgentSpec(id="jim", name="Jim", provider="claude")
    there = AgentSpec(id="jim", name="Jim", provider="claude", host="gpu1")
    config = OfficeConfig(office=OfficeSettings(manager="m"), agents=[here])
    paths = HivePaths(HOME)
    local = system_prompt(here, config, paths)
    remote = system_prompt(there, config, paths)
    assert str(HOME) in local
    assert str(HOME) not in remote
    assert "You run on gpu1" in remote and "hive memory search" in remote


def test_ssh_s_own_line_about_a_broken_link_is_found_at_the_end_of_the_output() -> None:
    tail = b"\x1b[?25lwork...\r\n\x1b[?2004hbash-5.2# Connection to 127.0.0.1 closed by remote host.\r\r\n"
    assert plan.tail_reason(tail) == "Connection to 127.0.0.1 closed by remote host."
    assert plan.tail_reason(b"client_loop: send disconnect: Broken pipe\r\n") == (
        "client_loop: send disconnect: Broken pipe"
    )
    assert plan.tail_reason(b"just the program's own output\r\n") is None


def test_the_desk_s_ssh_shares_its_connection_unless_the_master_path_cannot_fit() -> None:
    spec = AgentSpec(id="jim", name="Jim", provider="shell", host="gpu1", ssh_args=["-p", "2"])
    argv = ssh_argv(spec, HivePaths(HOME), "true", master=True)
    assert f"ControlPath={HOME}/run/ssh/jim.sock" in argv and "ControlMaster=yes" in argv
    assert argv[-5:] == ["-p", "2", "--", "gpu1", "true"]
    # ssh refuses a ControlPath whose temporary name passes 107 bytes: no sharing then.
    deep = HivePaths(Path("/srv/" + "x" * 80))
    argv = ssh_argv(spec, deep, "true", master=True)
    assert "ControlPath=none" in argv and not any(a.startswith("ControlMaster") for a in argv)


def test_a_named_folder_is_named_by_its_place_on_the_host_and_made_there() -> None:
    # Codex's CODEX_HOME: a folder whose files are shipped; the variable must follow.
    folder = "/srv/office/agent-settings/codex/jim"
    shipped = plan.ship_plan({f"{folder}/config.toml": b"x = 1"}, HOME, RDIR)
    there = plan.place_on_host(folder, HOME, RDIR)
    assert there == f"{RDIR}/files/agent-settings/codex/jim"
    start = plan.remote_start(
        ["codex"], {"CODEX_HOME": folder}, RDIR, "/w", shipped, "/v/bin",
        [plan.Shipped(folder, there, "")],
    )  # fmt: skip
    done = commands(start.script)
    assert ["export", f"CODEX_HOME={there}"] in done and folder not in start.script
    assert ["mkdir", "-p", there] in done
    assert done.index(["mkdir", "-p", there]) < done.index(["export", f"CODEX_HOME={there}"])
