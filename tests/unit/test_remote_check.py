"""The remote host check's pure parts: the probe's lines, ssh's failures, what doctor says."""

from __future__ import annotations

from hive_core.remote.check import (
    TAG,
    Cli,
    HostResult,
    Probe,
    classify_ssh_failure,
    findings,
    parse_probe,
    probe_script,
    version_of,
)
from hive_core.remote.setup import Target, failure_sentence, install_script
from hive_core.schema import AgentSpec

VENV = "~/.local/share/hive-office/venv"


def _agent(agent_id: str, **kw: object) -> AgentSpec:
    return AgentSpec(id=agent_id, name=agent_id.title(), host="box", **kw)  # type: ignore[arg-type]


def _lines(*rows: tuple[str, ...]) -> str:
    return "".join("\t".join((TAG, *row)) + "\n" for row in rows)


def test_parse_reads_every_kind_of_line_and_ignores_the_rest() -> None:
    out = (
        "Welcome to box! (an rc file talking)\n"
        + _lines(
            ("home", "/home/pam"),
            ("hive", "hive, version 0.1.0"),
            ("cth-hook", "yes"),
            ("cli", "jim", "/usr/bin/claude", "2.1.0 (Claude Code)"),
            ("cli-missing", "dwight"),
            ("cwd-missing", "dwight"),
        )
        + "hive-probe-not\thome\t/elsewhere\n"
    )
    probe = parse_probe(out)
    assert probe == Probe(
        home="/home/pam",
        hive="hive, version 0.1.0",
        cth_hook=True,
        clis={"jim": Cli("/usr/bin/claude", "2.1.0 (Claude Code)"), "dwight": Cli(None)},
        cwd_missing=frozenset({"dwight"}),
    )


def test_parse_without_hive_or_probe_lines() -> None:
    probe = parse_probe(_lines(("home", "/root"), ("hive-missing",), ("cth-hook", "no")))
    assert probe is not None and probe.hive is None and not probe.cth_hook
    assert parse_probe("") is None
    assert parse_probe("bash: sh: command not found\n") is None
    # A CLI whose --version printed nothing still counts as found.
    assert parse_probe(_lines(("cli", "jim", "/bin/x", ""))) == Probe(
        None, None, False, {"jim": Cli("/bin/x", "")}
    )


def test_version_of() -> None:
    assert version_of("hive, version 0.1.0") == "0.1.0"
    assert version_of("hive-office, version 1.2.3rc1") == "1.2.3rc1"
    assert version_of("0.4.2") == "0.4.2"
    assert version_of("") == ""


def test_probe_script_quotes_what_it_is_given() -> None:
    script = probe_script("~/v env", [("jim", "my cli; rm -rf /", "~/work dir")])
    assert "venv=\"$HOME\"/'v env'" in script
    assert "command -v 'my cli; rm -rf /'" in script
    assert "[ -d \"$HOME\"/'work dir' ]" in script


def test_classify_ssh_failures() -> None:
    cases = {
        "Host key verification failed.\r\n": "known_hosts",
        "pam@box: Permission denied (publickey,password).\n": "ssh-copy-id box",
        "ssh: connect to host box port 22: Connection refused\n": "start sshd there",
        "ssh: Could not resolve hostname box: Name or service not known\n": "cannot resolve",
        "ssh: connect to host box port 22: Connection timed out\n": "did not answer",
        "ssh: connect to host box port 22: No route to host\n": "did not answer",
    }
    for stderr, says in cases.items():
        assert says in classify_ssh_failure("box", stderr), stderr
    other = classify_ssh_failure("box", "first\nkex_exchange_identification: read: reset\n\n")
    assert other == "ssh to box failed: kex_exchange_identification: read: reset"
    assert "ssh -v box true" in classify_ssh_failure("box", "")


def _findings(result: HostResult, here: str = "0.1.0") -> list[tuple[bool, str, str]]:
    got = findings(
        result,
        VENV,
        here,
        install_hint=lambda a: f"install {a.provider}",
        program=lambda a: a.command[0] if a.command else a.provider,
    )
    return [(f.ok, f.what, f.fix) for f in got]


def test_findings_unreachable_host_names_its_agents_and_the_fix() -> None:
    agents = (_agent("jim"), _agent("pam"))
    result = HostResult("box", (), agents, None, "nothing accepts ssh connections at box")
    assert _findings(result) == [
        (
            False,
            "box (for jim, pam): not reachable over ssh",
            "nothing accepts ssh connections at box",
        )
    ]


def test_findings_missing_hive_and_cli_say_what_to_install() -> None:
    agents = (_agent("jim"), _agent("pam", provider="shell", command=["bash"]))
    probe = Probe("/home/u", None, False, {"jim": Cli(None), "pam": Cli("/bin/bash", "GNU bash")})
    got = _findings(HostResult("box", (), agents, probe))
    assert got[0][0] and "reachable" in got[0][1]
    assert (False, f"box: `hive` is not installed in {VENV}",
            "run `hive-office remote-setup box` to install it there") in got  # fmt: skip
    assert (False, "jim: `claude` not found on box", "on box: install claude") in got
    assert (True, "pam: shell on box -> /bin/bash (GNU bash)", "") in got
    # No cth-hook complaint while hive itself is missing: one fix covers both.
    assert not any("cth-hook" in what for _, what, _ in got)


def test_findings_version_mismatch_missing_hook_and_cwd() -> None:
    agents = (_agent("jim", cwd="~/repo"),)
    probe = Probe(
        "/home/u",
        "hive, version 0.0.9",
        False,
        {"jim": Cli("/usr/bin/claude", "")},
        frozenset({"jim"}),
    )
    got = _findings(HostResult("box", (), agents, probe))
    assert (False, f"box: hive 0.0.9 in {VENV}, but this machine has 0.1.0",
            "run `hive-office remote-setup box` to install this version there") in got  # fmt: skip
    assert any(not ok and "cth-hook" in what for ok, what, _ in got)
    assert any(not ok and what == "jim: working folder ~/repo does not exist on box"
               for ok, what, _ in got)  # fmt: skip
    assert (True, "jim: claude on box -> /usr/bin/claude", "") in got


def test_findings_all_well() -> None:
    agents = (_agent("jim"),)
    probe = Probe("/home/u", "hive, version 0.1.0", True, {"jim": Cli("/usr/bin/claude", "2.1")})
    assert all(ok for ok, _, _ in _findings(HostResult("box", (), agents, probe)))


def test_install_script_quotes_and_failure_sentences() -> None:
    script = install_script("~/my venv", "python3.11", ["--index-url=http://x/ y"], "a b.whl")
    assert "venv=\"$HOME\"/'my venv'" in script
    assert "'--index-url=http://x/ y'" in script
    assert "wheel=\"$tmp\"/'a b.whl'" in script
    # Only the folder it made is removed.
    assert script.count("rm -rf") == 1 and "trap 'rm -rf \"$tmp\"' EXIT" in script
    target = Target("box", (), "~/v", "python3.11", (), _agent("jim"))
    assert "no `python3.11` on box" in failure_sentence("python", target)
    assert "python3-venv" in failure_sentence("venv", target)
    assert "--pip-arg" in failure_sentence("pip-deps", target)
    assert failure_sentence("??", target) == "remote-setup failed on box at ??."
