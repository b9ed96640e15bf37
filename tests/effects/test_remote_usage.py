"""A remote desk's token usage is read on its host, through ssh (a real sshd on 127.0.0.1).

The host is this machine under a private sshd, so its files are on this disk too: the
tests prove the office reads them through ssh by taking the host away (the reads stop, and
resume where they left off) and by giving the office an environment of its own that points
elsewhere (decoy records there are never counted).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hive_core.agents.providers import providers
from hive_core.agents.usage import Tokens, UsageBook, UsageSource, claude_files, claude_parser
from hive_core.cost import CostWatch
from hive_core.cost.remote_usage import PROBE, Ask, Query, apply_reply, run_probe
from hive_core.paths import HivePaths
from hive_core.remote import plan
from hive_core.schema import AgentSpec, OfficeConfig, OfficeSettings
from tests.effects.test_cost import assistant, codex_lines
from tests.sshd_support import SshHost, forget_on_host, running_sshd

SESSION = "5b1c2d3e-0000-4000-8000-000000000001"
# assistant()'s usage per message: 100 input, `output`, 1000 cache write, 5000 cache read.
PER_MESSAGE = Tokens(input=100, cache_write=1000, cache_read=5000)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SshHost]:
    with running_sshd(tmp_path / "sshd") as h:
        yield h
    forget_on_host(tmp_path / "office")


def transcript(config_dir: Path, session: str = SESSION) -> Path:
    path = config_dir / "projects" / "-work-project" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def append(path: Path, *lines: str) -> None:
    with path.open("a") as f:
        f.writelines(line + "\n" for line in lines)


def messages(count: int, start: int = 0) -> list[str]:
    return [assistant(f"msg_{i}", "2026-12-01T07:00:00Z", output=i) for i in range(start, count)]


def expected(outputs: range) -> Tokens:
    total = Tokens()
    for output in outputs:
        total += Tokens(
            input=PER_MESSAGE.input,
            output=output,
            cache_write=PER_MESSAGE.cache_write,
            cache_read=PER_MESSAGE.cache_read,
        )
    return total


def office_env(tmp_path: Path) -> dict[str, str]:
    """The office's own environment: its HOME and Claude config are not the host's."""
    elsewhere = tmp_path / "office-user"
    decoy = transcript(elsewhere / ".claude")
    append(decoy, assistant("decoy", "2026-12-01T07:00:00Z", output=99_999))
    return {**os.environ, "HOME": str(elsewhere), "CLAUDE_CONFIG_DIR": str(elsewhere / ".claude")}


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def watch_for(
    tmp_path: Path, agents: list[AgentSpec], env: dict[str, str]
) -> tuple[CostWatch, HivePaths]:
    paths = HivePaths(tmp_path / "office")
    paths.home.mkdir(parents=True, exist_ok=True)
    # The host's venv is this one (the probe runs its Python there).
    config = OfficeConfig(office=OfficeSettings(remote_venv=sys.prefix), agents=agents)
    return CostWatch(paths, config, providers(), env), paths


def test_a_remote_claude_desks_usage_is_read_on_its_host_and_resumes_after_an_outage(
    tmp_path: Path, host: SshHost, caplog: pytest.LogCaptureFixture
) -> None:
    on_host = tmp_path / "on-host" / "claude"
    remote = transcript(on_host)
    append(remote, *messages(3))
    pam = AgentSpec(
        id="pam",
        name="Pam",
        host=host.alias,
        ssh_args=host.ssh_args,
        env={"CLAUDE_CONFIG_DIR": str(on_host)},
    )
    # kev's host refuses every connection; jim has no session yet (nothing to ask).
    kev = AgentSpec(
        id="kev",
        name="Kev",
        host=host.alias,
        ssh_args=[*host.ssh_args, "-p", str(refused_port())],
        env={"CLAUDE_CONFIG_DIR": str(on_host)},
    )
    jim = AgentSpec(id="jim", name="Jim", host=host.alias, ssh_args=host.ssh_args)
    watch, _ = watch_for(tmp_path, [pam, kev, jim], office_env(tmp_path))
    current: dict[str, str | None] = {"pam": SESSION, "kev": SESSION, "jim": None}
    # Passes here come back to back; on the office's clock each is a minute apart, past
    # the wait a quiet desk gets (cost/remote_usage.py quiet_delay).
    minutes = iter(range(0, 10**6, 60))
    watch.remote.clock = lambda: float(next(minutes))

    with caplog.at_level(logging.INFO, logger="hive_core.cost.remote_usage"):
        assert watch.read_pass(current)
        assert watch.agents["pam"].tokens == expected(range(3))
        assert "kev" not in watch.agents and "jim" not in watch.agents
        assert not watch.read_pass(current)  # nothing appended: nothing changes
        # The unreachable host is logged once, not every pass.
        down = [r for r in caplog.records if "kev" in r.getMessage()]
        assert len(down) == 1 and down[0].levelno == logging.WARNING

        # The host stops answering; the transcript grows there meanwhile.
        host.pause()
        try:
            append(remote, *messages(5, start=3))
            assert not watch.read_pass(current)
            assert watch.agents["pam"].tokens == expected(range(3))
        finally:
            host.resume()
        assert [r.getMessage() for r in caplog.records if "pam" in r.getMessage()]

        # Back: what was appended arrives, once.
        assert watch.read_pass(current)
        assert watch.agents["pam"].tokens == expected(range(5))
        assert not watch.read_pass(current)
        assert watch.agents["pam"].tokens == expected(range(5))
        assert any("works again" in r.getMessage() for r in caplog.records)
    # The office's own Claude config (the decoy) was never read for anyone.
    assert all(s.tokens.output < 99_999 for s in watch.agents.values())


def test_a_remote_codex_desks_rollouts_are_read_in_its_folder_on_the_host(
    tmp_path: Path, host: SshHost
) -> None:
    dwight = AgentSpec(
        id="dwight", name="Dwight", provider="codex", host=host.alias, ssh_args=host.ssh_args
    )
    watch, paths = watch_for(tmp_path, [dwight], dict(os.environ))
    # Where the launch ships its CODEX_HOME on the host (this machine's $HOME).
    rdir = Path.home() / plan.rdir_relative(plan.office_key(paths.home), "dwight")
    codex_home = rdir / "files" / "agent-settings" / "codex" / "dwight"
    rollout = codex_home / "sessions" / "2026" / "12" / "01" / "rollout-1.jsonl"
    rollout.parent.mkdir(parents=True)
    append(rollout, *codex_lines())
    # The office's own copy of that folder holds other records: never read for a remote desk.
    local = paths.provider_home("codex", "dwight") / "sessions" / "2026" / "12" / "01"
    local.mkdir(parents=True)
    append(local / "rollout-9.jsonl", *codex_lines()[:2])

    assert not watch.read_pass({"dwight": None})  # no session yet: no ssh at all
    assert watch.read_pass({"dwight": "019a0000-codex"})
    assert watch.agents["dwight"].tokens == Tokens(input=600, output=300, cache_read=1800)


def test_the_probe_catches_up_in_capped_pieces_to_what_a_local_read_gives(
    tmp_path: Path,
) -> None:
    """The host's program itself (run here directly, without ssh): a file read in pieces
    no bigger than the caps, a partial line kept back, a replaced file read again."""
    config_dir = tmp_path / "claude"
    path = transcript(config_dir)
    sub = path.parent / SESSION / "subagents" / "agent-1.jsonl"
    sub.parent.mkdir(parents=True)
    append(path, *messages(20))
    append(sub, assistant("sub_1", "2026-12-01T07:00:00Z", output=3))
    with path.open("a") as f:
        f.write(assistant("msg_20", "2026-12-01T07:00:00Z")[:50])  # still being written

    query = Query(
        var="CLAUDE_CONFIG_DIR",
        root="~/.claude",
        env={"CLAUDE_CONFIG_DIR": str(config_dir)},
        globs=[f"projects/*/{SESSION}.jsonl", f"projects/*/{SESSION}/subagents/*.jsonl"],
        file_max=700,
        reply_max=1000,
    )
    remote = UsageBook()
    passes = 0
    while True:
        ask = Ask(
            "pam",
            "here",
            "here",
            [sys.executable, "-I", "-c", PROBE],
            msgspec.structs.replace(query, known=remote.offsets("pam")),
            claude_parser,
        )
        outcome = run_probe(ask, os.environ)
        assert outcome.chunks is not None, outcome.reason
        sizes = [len(c.data) for c in outcome.chunks]
        assert all(size <= 700 for size in sizes) and sum(sizes) <= 1000
        passes += 1
        if not sum(sizes):
            break
        apply_reply(remote, "pam", outcome.chunks, claude_parser)
    assert passes > 5
    local = UsageBook()
    local.read("pam", UsageSource(files=claude_files(config_dir, [SESSION]), parser=claude_parser))
    assert sorted(map(repr, remote.records("pam"))) == sorted(map(repr, local.records("pam")))
    assert len(remote.records("pam")) == 21  # msg_0..msg_19 and sub_1, not the partial line

    # Replaced on the host: read again from its start (the new message counts).
    replacement = path.with_name("new.jsonl")
    replacement.write_text(messages(1)[0] + "\n" + messages(22, start=21)[0] + "\n")
    os.replace(replacement, path)
    ask = Ask(
        "pam",
        "here",
        "here",
        [sys.executable, "-I", "-c", PROBE],
        msgspec.structs.replace(
            query, known=remote.offsets("pam"), file_max=10_000, reply_max=10_000
        ),
        claude_parser,
    )
    outcome = run_probe(ask, os.environ)
    assert outcome.chunks is not None
    assert apply_reply(remote, "pam", outcome.chunks, claude_parser)
    assert "msg_21" in {r.key for r in remote.records("pam")}
