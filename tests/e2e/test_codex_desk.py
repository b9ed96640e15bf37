"""A Codex desk for real: the pinned Codex CLI (scripts/codex-version) in a real
`hive-office serve`, against a scripted OpenAI Responses API on 127.0.0.1 that records
what Codex sent (tests/codex_office.py). The same ground as the claude desk's tests:
no sign-in screen with a key, SessionStart in the registry and `why`, mail drained at
the end of a turn and answered with `hive reply`, an idle desk woken once, tools refused
with the office's reason (which the model reads), a restart resuming the session, token
usage from Codex's own records in `hive-office cost`, and `gh run view --log` read from
the office's CI-log cache."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hive_core.agents.codex import START_PROMPT
from hive_core.demo.scripted_model import RecordedRequest, Turn, turn
from hive_core.demo.scripted_model.responses import (
    CACHED_TOKENS,
    DEFAULT_MODEL,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    call_output_says,
    call_outputs,
    code_shell,
    has_call_output,
    input_says,
    last_input_texts,
    shell,
)
from hive_core.team.wake import nudge_text
from tests.claude_office import BIN, ClaudeOffice
from tests.codex_office import (
    API_KEY,
    CODEX,
    DESK,
    make_codex_office,
    model_of,
    serving_codex,
    stop_serving,
)
from tests.e2e.test_ci_logs import REPO, FakeGh
from tests.support import wait_for
from tests.tmux_support import Tmux, row_text, tmux_env

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CODEX is None, reason="codex CLI not found (run scripts/setup)"),
]

MESSAGE_ID = re.compile(r"\b(\d{8}T\d{6}\d*Z-[0-9a-f]{6})\b")


@pytest.fixture
def office_with(short_tmp: Path) -> Iterator[Callable[..., ClaudeOffice]]:
    made: list[ClaudeOffice] = []

    def make(turns: list[Turn], **kwargs: Any) -> ClaudeOffice:
        office = make_codex_office(short_tmp, turns, **kwargs)
        made.append(office)
        return office

    yield make
    for office in made:
        office.close()


def why(office: ClaudeOffice) -> dict[str, Any]:
    out = office.run("hive-office", "why", "--home", str(office.home), DESK, "--json")
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def type_into(office: ClaudeOffice, text: str) -> None:
    office.run("hive-office", "type", "--home", str(office.home), DESK, text)


def send(office: ClaudeOffice, subject: str, body: str = "see subject") -> None:
    office.run("hive", "send", "--to", DESK, "--subject", subject, "--body", body)


def texts(request: RecordedRequest) -> str:
    return "\n".join(last_input_texts(request.body))


def all_texts(request: RecordedRequest) -> str:
    return json.dumps(request.body.get("input"))


def reply_to_mail(request: dict[str, Any]) -> list[Any]:
    """`hive reply` to the first message id the office showed in this request, and
    `hive done` on it (reading does not mark it processed)."""
    found = MESSAGE_ID.search("\n".join(last_input_texts(request)))
    assert found, last_input_texts(request)
    msg = found.group(1)
    return [shell(f"hive reply {msg} --act done --body 'Handled by Dwight.' && hive done {msg}")]


def test_a_key_starts_the_desk_straight_into_a_session_seen_on_the_map_and_in_why(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    office = office_with([])
    with serving_codex(office, short_tmp / "serve.log"):
        entry = office.registry()[DESK]
        assert entry["state"] == "idle" and entry["provider"] == "codex"
        session = entry["session_id"]
        explained = why(office)
        assert explained["kind"] == "idle"
        assert explained["evidence"].startswith("last hook S")  # SessionStart, or the Stop after it
        # Past any sign-in screen: Codex asked the model, with the key the roster gave.
        model = model_of(office)
        first = model.main_requests[0]
        assert first.headers["authorization"] == f"Bearer {API_KEY}"
        # The session Codex reported is the one it tells the API about.
        assert session in json.dumps(first.body["client_metadata"])
        # SessionStart's context (identity, inbox) reached the model.
        assert "Your inbox is empty." in all_texts(first) and "Dwight" in all_texts(first)
    home = office.home / "agent-settings" / "codex" / DESK
    assert json.loads((home / "auth.json").read_text())["auth_mode"] == "apikey"


def test_the_floor_shows_the_desk_idle_at_codexs_own_prompt_with_no_sign_in(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    office = office_with([])
    tmux = Tmux(short_tmp, {**tmux_env(short_tmp), "PATH": office.env["PATH"]})
    try:
        with serving_codex(office, short_tmp / "serve.log"):
            attach = f"hive-office attach --home {office.home}"
            tmux("new-session", "-d", "-s", "floor", "-x", "160", "-y", "48", attach)
            wait_for(lambda: "ctrl+] then" in screen(tmux), "the floor", 60)
            pressed = [0.0]

            def idle_pane() -> str | None:
                text = screen(tmux)
                if "2 Dwight · idle" in text and "OpenAI Codex (v0.169.0)" in text:
                    return text
                # Dwight's pane; asked again while the app may not take keys yet.
                if time.monotonic() - pressed[0] > 2:
                    tmux.keys("floor", "C-]")
                    tmux.keys("floor", "2")
                    pressed[0] = time.monotonic()
                return None

            shown = wait_for(idle_pane, "Dwight's pane titled idle, showing Codex", 60)
            assert "OpenAI Codex (v0.169.0)" in shown and START_PROMPT in shown, shown
            assert "Sign in" not in shown and "Choose how you want to use Codex" not in shown
    finally:
        tmux.kill()


def screen(tmux: Tmux) -> str:
    return "\n".join(row_text(row) for row in tmux.capture("floor"))


def test_mail_arriving_mid_turn_is_drained_at_stop_and_answered_with_hive_reply(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    office = office_with(
        [
            turn(input_says("work a while"), "Working.", shell("echo step-one")),
            # The model is still thinking when the mail comes: its turn then ends.
            turn(call_output_says("step-one"), "Step one done.", delay=3.0),
            turn(input_says("Budget question"), build=reply_to_mail),
            turn(call_output_says("marked 1 message done"), "Replied."),
        ]
    )
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        type_into(office, "work a while")
        model.wait_for(lambda r: r.turn == 1, 90)
        send(office, "Budget question", "How much is left?")
        drained = model.wait_for(lambda r: r.turn == 2, 90)
        model.wait_for(lambda r: r.turn == 3, 90)
        # The Stop hook's digest came back to the model as the next input.
        assert "Budget question" in texts(drained) and "hive done ID" in texts(drained)
        replies = wait_for(lambda: office.inbox("human"), "dwight's reply", 60)
        assert replies[0]["subject"] == "Re: Budget question"
        assert replies[0]["body"] == "Handled by Dwight." and replies[0]["from"] == DESK
        wait_for(lambda: office.registry()[DESK]["state"] == "idle", "dwight idle", 60)
        details = [e["detail"] for e in office.log(DESK)]
        assert any("Stop" in d and "kept working" in d for d in details), details
        assert not office.inbox(DESK)  # consumed


def test_an_idle_desk_with_new_mail_is_woken_once(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    office = office_with(
        [
            turn(input_says("Run hive inbox"), shell("hive inbox")),
            turn(call_output_says("Lunch order"), build=reply_to_mail),
            turn(has_call_output(), "Done."),
        ]
    )
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        send(office, "Lunch order", "Pizza or salad?")
        woken = model.wait_for(lambda r: r.turn == 0, 90)
        assert "unread message (from human). Run hive inbox." in texts(woken)
        wait_for(lambda: office.inbox("human"), "dwight's reply", 90)
        wait_for(lambda: office.registry()[DESK]["state"] == "idle", "dwight idle", 60)
        nudge = nudge_text([]).split(". ")[-1]  # "Run hive inbox."
        nudged = [r for r in model.main_requests if nudge in texts(r)]
        assert len(nudged) == 1, [texts(r) for r in nudged]


def test_denied_tools_are_refused_with_the_office_reason_the_model_reads(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    home = short_tmp / "home"
    calls = [
        shell(f"echo x > {home}/agent-settings/codex/{DESK}/config.toml"),
        shell("curl -s http://127.0.0.1:9/"),
        shell("echo allowed-ok"),
    ]
    office = office_with(
        [
            turn(input_says("try the locks"), *calls),
            turn(has_call_output(), "Noted."),
        ]
    )
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        type_into(office, "try the locks")
        answered = model.wait_for(lambda r: r.turn == 1, 90)
        outputs = call_outputs(answered.body)
        assert len(outputs) == 3, outputs
        locked, curl, allowed = outputs
        assert "agent-settings/ (your CLI's settings and hooks) is locked" in locked, locked
        assert "`curl` reaches the network, and you are not a research agent" in curl, curl
        assert "allowed-ok" in allowed  # the allowed path runs
    assert "x" not in (home / "agent-settings" / "codex" / DESK / "config.toml").read_text()[:1]


def test_on_codexs_default_model_a_tool_called_from_its_script_meets_the_same_policy(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    # gpt-6.1-sol calls tools from JavaScript (its `exec` tool): the hooks still see each
    # shell command it runs, so the office refuses and the script reads the reason.
    home = short_tmp / "home"
    office = office_with(
        [
            turn(input_says("try the lock"), code_shell(f"echo x > {home}/agent-settings/a")),
            turn(has_call_output(), "Noted."),
            turn(input_says("say hi"), code_shell("echo allowed-ok")),
            turn(has_call_output(), "Said."),
        ],
        model=None,
    )
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        type_into(office, "try the lock")
        refused = "\n".join(call_outputs(model.wait_for(lambda r: r.turn == 1, 90).body))
        type_into(office, "say hi")
        allowed = "\n".join(call_outputs(model.wait_for(lambda r: r.turn == 3, 90).body))
    assert model.main_requests[0].body["model"] == DEFAULT_MODEL
    assert "agent-settings/ (your CLI's settings and hooks) is locked" in refused, refused
    assert not (home / "agent-settings" / "a").exists()
    assert "allowed-ok" in allowed, allowed


def test_a_restart_resumes_the_same_codex_session(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    office = office_with(
        [
            turn(input_says("remember pineapple"), "Noted: pineapple."),
            turn(input_says("what fruit"), "Pineapple."),
        ]
    )
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        type_into(office, "remember pineapple")
        model.wait_for(lambda r: r.turn == 0, 90)
        wait_for(lambda: office.registry()[DESK]["state"] == "idle", "dwight idle", 60)
        session = office.registry()[DESK]["session_id"]
    seen = len(model.requests)
    proc = subprocess.Popen(
        [str(BIN / "hive-office"), "serve", "--home", str(office.home)],
        env=office.env,
        stdout=(short_tmp / "serve2.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        started = wait_for(
            lambda: next((r for r in model.requests[seen:] if r.kind == "main"), None),
            "the resumed desk's first request",
            120,
        )
        # The resumed conversation carries what was said before the restart.
        assert "remember pineapple" in all_texts(started)
        wait_for(lambda: office.registry()[DESK]["state"] == "idle", "dwight idle again", 60)
        assert office.registry()[DESK]["session_id"] == session
        assert any(f"resuming {session}" in e["detail"] for e in office.log(DESK))
        type_into(office, "what fruit")
        model.wait_for(lambda r: r.turn == 1, 90)
    finally:
        stop_serving(proc)


def test_token_usage_from_codex_records_reaches_hive_office_cost(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    office = office_with(
        [
            turn(input_says("count tokens"), "Counting.", shell("echo counted")),
            turn(call_output_says("counted"), "Counted."),
        ]
    )
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        type_into(office, "count tokens")
        model.wait_for(lambda r: r.turn == 1, 90)
        wait_for(lambda: office.registry()[DESK]["state"] == "idle", "dwight idle", 60)

        def matches() -> bool:
            calls = len(model.main_requests)
            rows = json.loads(
                office.run("hive-office", "cost", "--home", str(office.home), "--json").stdout
            )["rows"]
            want = {
                "input": calls * (INPUT_TOKENS - CACHED_TOKENS),
                "output": calls * OUTPUT_TOKENS,
                "cache_write": 0,
                "cache_read": calls * CACHED_TOKENS,
            }
            return DESK in rows and rows[DESK]["tokens"] == want

        wait_for(matches, "hive-office cost to equal the usage the API reported", 60)


def test_gh_run_view_log_is_served_from_the_ci_log_cache(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    # The desk is contained: `hive ci-logs view` runs in a process the office starts for
    # it (the fake gh, and the cache it fills, are written from there).
    gh = FakeGh(short_tmp / "fakebin")
    command = f"gh run view 123 --log-failed --repo {REPO}"
    office = office_with(
        [
            turn(input_says("read the CI log"), shell(command)),
            turn(call_output_says("quasarflux"), shell(command)),
            turn(has_call_output(), "Read it."),
        ],
    )
    office.env["PATH"] = f"{gh.folder}:{office.env['PATH']}"
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        type_into(office, "read the CI log")
        first = "\n".join(call_outputs(model.wait_for(lambda r: r.turn == 1, 90).body))
        second = "\n".join(call_outputs(model.wait_for(lambda r: r.turn == 2, 90).body))
    for result in (first, second):
        assert "FAILED test_timeout (quasarflux, attempt 1)" in result, result
    assert len(gh.log_calls()) == 1, gh.calls()
    assert "fetched and kept" in first and "from the cache" in second
    notes = [e.get("detail", "") for e in office.log(DESK)]
    assert sum("through the CI-log cache" in n for n in notes) == 2, notes


def patch(path: str, old: str, new: str) -> str:
    """A shell call Codex runs as its apply_patch (how the gpt-5.1-codex family edits)."""
    return (
        f"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n"
        "*** End Patch\nEOF"
    )


def test_an_edit_of_a_leased_file_is_refused_with_the_holder_the_model_reads(
    office_with: Callable[..., ClaudeOffice], short_tmp: Path
) -> None:
    target = short_tmp / "project" / "src" / "parser.py"
    denied, appended = (
        shell(patch("src/parser.py", "x = 1", "x = 2")),
        shell("echo y >> src/parser.py"),
    )
    office = office_with(
        [
            turn(input_says("edit the parser"), denied, appended),
            turn(has_call_output(), "Leased by someone else."),
            turn(input_says("try again"), shell(patch("src/parser.py", "x = 1", "x = 2"))),
            turn(has_call_output(), "Edited."),
        ],
        # Pam holds the lease: a desk with no CLI, which the person acts for.
        options='worktree = false\n\n[[agents]]\nid = "pam"\nname = "Pam"\nprovider = "shell"\n'
        "send_only = true\n",
    )
    target.parent.mkdir(parents=True)
    target.write_text("x = 1\n")
    for args in (("add", "."), ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s")):
        subprocess.run(["git", *args], cwd=office.project, check=True, capture_output=True)
    model = model_of(office)
    with serving_codex(office, short_tmp / "serve.log"):
        taken = office.run(
            "hive", "lease", str(target), "--reason", "new grammar", "--ttl", "10m", agent="pam"
        )
        assert "leased src/parser.py in" in taken.stdout
        type_into(office, "edit the parser")
        outputs = call_outputs(model.wait_for(lambda r: r.turn == 1, 90).body)
        assert target.read_text() == "x = 1\n"
        # The holder renews it to one second; once it lapsed, the same patch goes through.
        office.run("hive", "lease", str(target), "--ttl", "1s", agent="pam")
        wait_for(
            lambda: not json.loads(office.run("hive", "lease", "list", "--json").stdout)["leases"],
            "the lease to lapse",
        )
        type_into(office, "try again")
        allowed = call_outputs(model.wait_for(lambda r: r.turn == 3, 90).body)
        assert "Success. Updated the following files" in allowed[0], allowed
        assert target.read_text() == "x = 2\n"
    patched, echoed = outputs
    for output in (patched, echoed):
        assert "src/parser.py in" in output and "is leased by pam until" in output, output
        assert "(new grammar)" in output
    assert "Your shell command would write where you must not" in echoed
    denials = [e["detail"] for e in office.log(DESK) if "denied" in e["detail"]]
    assert sum("denied Edit" in d for d in denials) == 1, denials
