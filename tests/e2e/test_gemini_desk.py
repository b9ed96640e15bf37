"""A gemini desk for real: the pinned Gemini CLI (scripts/gemini-version) in a real
`hive-office serve`, against the scripted Gemini API on 127.0.0.1 (its
streamGenerateContent speaks the real SSE protocol and records what Gemini sent).

The office is a shell manager (michael, hookless) and jim, a gemini desk whose roster
`env` holds GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL. What is pinned here: the desk
starts into a session with no sign-in screen and its hooks (written to the user settings
of its own GEMINI_CLI_HOME) reach the office; mail that arrives mid-turn is drained at
AfterAgent and answered with `hive reply`; an idle desk is woken once; the office's
refusals (a locked file, a leased path, the network) reach the model as the tool's
error; a restart resumes the session; and `hive-office cost` reads Gemini's own records.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hive_core.agents.gemini import DEFAULTS, with_defaults
from hive_core.demo.scripted_model import ToolUse, Turn, turn
from hive_core.demo.scripted_model.anthropic import RecordedRequest
from hive_core.demo.scripted_model.gemini import (
    CACHED_TOKENS,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    THOUGHT_TOKENS,
    all_texts,
    function_responses,
    has_tool_result,
    last_user_texts,
    shell,
    tool_result_says,
    user_says,
)
from tests.e2e.test_ci_logs import REPO, FakeGh
from tests.gemini_office import API_KEY, BIN, GEMINI, GeminiFloor, make_gemini_floor
from tests.support import short_dir, wait_for
from tests.tmux_support import (
    PREFIX_KEY,
    Tmux,
    TmuxOffice,
    crop,
    differences,
    find_box,
    row_text,
    tmux_env,
)

SIGN_IN = "How would you like to authenticate"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(GEMINI is None, reason="gemini CLI not found (run scripts/setup)"),
]


@pytest.fixture
def make_floor(short_tmp: Path) -> Iterator[Callable[..., GeminiFloor]]:
    floors: list[GeminiFloor] = []

    def make(jim: Sequence[Turn], **kwargs: Any) -> GeminiFloor:
        # Short paths: the office's sockets live under the home (AF_UNIX paths <= 107 bytes).
        floor = make_gemini_floor(short_tmp, jim, **kwargs)
        floors.append(floor)
        return floor

    yield make
    for floor in floors:
        floor.stop()
        floor.model.stop()


def main_texts(request: RecordedRequest) -> str:
    return "\n".join(last_user_texts(request.body)) if request.kind == "main" else ""


# --- 1 ------------------------------------------------------------------------------------


def test_a_keyed_desk_starts_into_a_session_and_its_hooks_reach_the_office(
    make_floor: Callable[..., GeminiFloor],
) -> None:
    floor = make_floor(
        [
            turn(user_says("hello office"), "Looking.", shell("hive roster")),
            turn(has_tool_result(), "Hi!"),
        ]
    )
    floor.serve()
    # SessionStart named the session the office chose (--session-id): the registry, the
    # map's state and `why` are the hooked desk's, not a starting CLI's.
    jim = floor.jim()
    session = jim["session_id"]
    [chat] = floor.chats()
    assert json.loads(chat.read_text().splitlines()[0])["sessionId"] == session
    why = floor.why()
    assert why["kind"] == "idle", why
    assert "has not reported its session" not in why["why"] and "hookless" not in why["why"]
    status = floor.run("hive-office", "status", "--home", str(floor.home)).stdout
    assert re.search(r"jim\b.*\bidle\b", status), status

    floor.type("hello office")
    wait_for(lambda: floor.model.scenario.done, "jim's scripted turns", timeout=90)
    wait_for(lambda: floor.jim().get("status") == "idle", "jim idle after the turn", 60)
    log = floor.log()
    assert any("UserPromptSubmit" in d and "[idle -> working]" in d for d in log), log
    assert any("Stop: turn ended [working -> idle]" in d for d in log), log

    first = floor.model.main_requests[0].body
    # The identity, as the global GEMINI.md of the desk's own Gemini home.
    assert "GEMINI.md" in all_texts(first) and "jim" in json.dumps(first["systemInstruction"])
    # `hive` ran without a confirmation (the office's policy rule), and its output
    # reached the model.
    [roster] = function_responses(floor.model.main_requests[1].body)
    assert roster["name"] == "run_shell_command" and "michael" in json.dumps(roster)
    # Nothing of Gemini's in the person's home, and no sign-in asked: the key was used.
    assert not (floor.root / "user" / ".gemini").exists()
    assert all(r.headers.get("x-goog-api-key") == API_KEY for r in floor.model.main_requests)
    settings = json.loads((floor.gemini_home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"

    # Token usage from Gemini's own chat records, per answer: what usageMetadata said.
    calls = len(floor.model.main_requests)

    def rows() -> dict[str, Any] | None:
        out = floor.run("hive-office", "cost", "--home", str(floor.home), "--json").stdout
        row: dict[str, Any] | None = json.loads(out)["rows"].get("jim")
        return row if row and row["tokens"]["output"] else None

    want = {
        "input": calls * (PROMPT_TOKENS - CACHED_TOKENS),
        "output": calls * (OUTPUT_TOKENS + THOUGHT_TOKENS),
        "cache_write": 0,
        "cache_read": calls * CACHED_TOKENS,
    }
    row = wait_for(lambda: (r := rows()) and r["tokens"] == want and r, "jim's usage", 60)
    assert row["tokens"] == want
    # Gemini's models have no built-in price: tokens are shown, the cost says so.
    assert row["unpriced"], row


# --- 2 ------------------------------------------------------------------------------------


def test_mail_that_arrives_mid_turn_is_drained_at_after_agent_and_answered(
    make_floor: Callable[..., GeminiFloor],
) -> None:
    mail: dict[str, str] = {}
    floor = make_floor(
        [
            turn(user_says("start the build"), shell("hive roster"), delay=4.0),
            turn(has_tool_result(), "Build started."),
            turn(
                user_says("hive inbox"),
                build=lambda req: [shell(f"hive reply {mail['id']} --body 'Build is green.'")],
            ),
            turn(has_tool_result(), build=lambda req: [shell(f"hive done {mail['id']}")]),
            turn(has_tool_result(), "Answered."),
        ]
    )
    floor.serve()
    floor.type("start the build")
    wait_for(lambda: floor.jim().get("status") == "working", "jim working", 30)
    mail["id"] = floor.mail_jim("build status?")
    # AfterAgent refused the end of the turn: the office's reason is Gemini's next prompt.
    drained = floor.model.wait_for(lambda r: "hive inbox" in main_texts(r), 90)
    text = main_texts(drained)
    assert mail["id"] in text and "build status?" in text, text
    reply = wait_for(
        lambda: [m for m in floor.inbox("human") if m.get("in_reply_to") == mail["id"]],
        "jim's reply in the person's inbox",
        timeout=90,
    )[0]
    assert reply["from"] == "jim" and reply["body"] == "Build is green."
    wait_for(lambda: not floor.inbox("jim"), "jim marks the message done", 60)
    wait_for(lambda: floor.jim().get("status") == "idle", "jim idle", 60)
    # Drained at the end of the turn, so never nudged.
    assert not any("nudged" in d for d in floor.log()), floor.log()


# --- 3 ------------------------------------------------------------------------------------


def test_an_idle_desk_with_new_mail_is_woken_once(make_floor: Callable[..., GeminiFloor]) -> None:
    mail: dict[str, str] = {}
    floor = make_floor(
        [
            turn(
                user_says("Run hive inbox"),
                build=lambda req: [shell(f"hive reply {mail['id']} --body 'On it.'")],
            ),
            turn(has_tool_result(), build=lambda req: [shell(f"hive done {mail['id']}")]),
            turn(has_tool_result(), "Done."),
        ]
    )
    floor.serve()
    mail["id"] = floor.mail_jim("are you there?")
    wait_for(
        lambda: [m for m in floor.inbox("human") if m.get("in_reply_to") == mail["id"]],
        "jim's answer after the nudge",
        timeout=90,
    )
    wait_for(lambda: not floor.inbox("jim"), "jim marks the message done", 60)
    wait_for(lambda: floor.jim().get("status") == "idle", "jim idle", 60)
    nudges = [r for r in floor.model.main_requests if "Run hive inbox" in main_texts(r)]
    assert len(nudges) == 1, [main_texts(r) for r in nudges]
    assert "You have 1 unread message (from human)" in main_texts(nudges[0])
    assert sum("nudged:" in d for d in floor.log()) == 1, floor.log()


# --- 4 ------------------------------------------------------------------------------------

PAM = '\n[[agents]]\nid = "pam"\nname = "Pam"\nprovider = "shell"\nsend_only = true\n'


def test_refused_tools_reach_the_model_with_the_offices_reason(
    make_floor: Callable[..., GeminiFloor],
) -> None:
    calls: list[Any] = []
    floor = make_floor(
        [
            turn(user_says("try the rules"), build=lambda req: calls),
            turn(has_tool_result(), "Noted."),
        ],
        jim_options="worktree = false\n",
        more=PAM,
    )
    target = floor.project / "src" / "parser.py"
    target.parent.mkdir(parents=True)
    target.write_text("x = 1\n")
    for args in (
        ("init", "-q", "-b", "main"),
        ("add", "."),
        ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"),
    ):
        subprocess.run(["git", *args], cwd=floor.project, check=True, capture_output=True)
    locked = floor.home / "agent-settings" / "jim.json"
    calls += [
        # The URL is never reached: the office refuses before Gemini runs it.
        shell("curl -s http://127.0.0.1:9/"),
        shell(f"echo x > {locked}"),
        shell(f"echo 'x = 2' > {target}"),
        # Gemini's own file tools, under their Claude names (Write, Edit) for the rules.
        ToolUse("write_file", {"file_path": str(locked), "content": "x"}),
        ToolUse(
            "replace",
            {
                "file_path": str(target),
                "instruction": "Set x to 2.",
                "old_string": "x = 1",
                "new_string": "x = 2",
            },
        ),
        # Allowed (it reaches michael's inbox): the refusals are the rules, not the shell.
        shell("hive send --to michael --subject 'rules tried' --body 'all refused'"),
    ]
    floor.serve()
    floor.run("hive", "lease", str(target), "--reason", "new grammar", "--ttl", "10m", agent="pam")
    floor.type("try the rules")
    answered = floor.model.wait_for(lambda r: r.turn == 1, 90).body
    results = function_responses(answered)
    assert [r["name"] for r in results] == [
        *["run_shell_command"] * 3,
        "write_file",
        "replace",
        "run_shell_command",
    ]
    curl, settings, leased, written, edited, allowed = (json.dumps(r["response"]) for r in results)
    locked_reason = "agent-settings/ (your CLI's settings and hooks) is locked"
    for result, reason in (
        (curl, "`curl` reaches the network, and you are not a research agent"),
        (settings, locked_reason),
        (leased, "is leased by pam until"),
        (edited, "is leased by pam until"),
    ):
        assert "Tool execution blocked" in result and reason in result, result
    # A file tool's path outside the desk's folder is Gemini's own refusal, before any
    # hook (the office's files are outside it): the model reads Gemini's reason.
    assert "Path not in workspace" in written and "Tool execution blocked" not in written
    assert "(new grammar)" in leased and "(new grammar)" in edited
    assert "Tool execution blocked" not in allowed, allowed
    wait_for(
        lambda: any(m["subject"] == "rules tried" for m in floor.inbox("michael")),
        "jim's allowed hive send in michael's inbox",
        30,
    )
    assert target.read_text() == "x = 1\n" and not locked.exists()
    denied = [d for d in floor.log() if "denied" in d]
    assert len(denied) == 4, denied


# --- 5 ------------------------------------------------------------------------------------


def test_a_restart_resumes_the_same_session(make_floor: Callable[..., GeminiFloor]) -> None:
    floor = make_floor(
        [
            turn(user_says("remember the word kumquat"), "Remembered."),
            turn(user_says("what was the word"), "Kumquat."),
        ]
    )
    floor.serve()
    session = floor.jim()["session_id"]
    floor.type("remember the word kumquat")
    floor.model.wait_for(lambda r: r.turn == 0, 60)
    wait_for(lambda: floor.jim().get("status") == "idle", "jim idle", 60)
    floor.stop()

    floor.serve()
    assert floor.jim()["session_id"] == session
    floor.type("what was the word")
    resumed = floor.model.wait_for(lambda r: r.turn == 1, 90).body
    # The earlier turn is in the resumed conversation Gemini sent.
    assert "remember the word kumquat" in json.dumps(resumed["contents"])
    assert "Remembered." in json.dumps(resumed["contents"])
    # Gemini went on recording into the session's own file.
    wait_for(
        lambda: any(
            "Remembered." in (text := chat.read_text()) and "Kumquat." in text
            for chat in floor.chats()
        ),
        "both answers in one chat record",
        30,
    )
    starts = [d for d in floor.log() if "SessionStart" in d]
    assert len(starts) >= 2, starts


# --- 6 ------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (run scripts/setup)")
def test_gemini_in_an_office_pane_shows_what_tmux_shows_in_every_layout() -> None:
    """The sign-in box drawn twice at 160x48 is Gemini's own: after a narrower resize
    (a desk starts at the office's default size, then takes its box's) its normal-buffer
    UI leaves the old frame's rewrapped lines above the new one in a plain tmux pane too.
    In the alternate screen, which the office turns on for its desks, it redraws whole,
    and the office pane matches tmux cell for cell through every layout change."""
    with short_dir() as root:
        office = TmuxOffice(root)
        try:
            homes = {}
            for target in ("office", "ref"):
                homes[target] = root / f"gemini-{target}"
                (homes[target] / ".gemini").mkdir(parents=True)
                settings = with_defaults({}, DEFAULTS)
                (homes[target] / ".gemini" / "settings.json").write_text(json.dumps(settings))
                # No key: Gemini's sign-in box, the screen of the report.
                office.tmux.keys(
                    target,
                    f"clear; env -u GEMINI_API_KEY GEMINI_CLI_TRUST_WORKSPACE=true "
                    f"GEMINI_CLI_HOME={homes[target]} {GEMINI}",
                    "Enter",
                )
            for layout in ("default", "zoom", "grid", "default"):
                office.set_layout(layout)
                same_screen(office, SIGN_IN)
        finally:
            office.close()

    # Gemini's own double draw, without the office: a plain tmux pane narrowed under its
    # normal-buffer UI shows the box's options twice.
    with short_dir() as root:
        tmux = Tmux(root, tmux_env(root))
        (root / "g" / ".gemini").mkdir(parents=True)
        command = f"env -u GEMINI_API_KEY GEMINI_CLI_TRUST_WORKSPACE=true GEMINI_CLI_HOME={root}/g {GEMINI}"
        tmux("new-session", "-d", "-s", "plain", "-x", "120", "-y", "40", "-c", str(root), command)
        try:
            wait_for(lambda: drawn(tmux, "plain"), "the whole sign-in box, drawn", 60)
            tmux("resize-window", "-t", "plain", "-x", "94", "-y", "31")
            wait_for(
                lambda: screen_text(tmux, "plain").count("Sign in with Google") == 2,
                "Gemini's second box in plain tmux",
                30,
            )
        finally:
            # Gemini's launcher ignores SIGHUP and SIGTERM: ending tmux alone would leave
            # it running. The pane's process group is the CLI's (both its processes).
            pane_pid = int(tmux("display", "-p", "-t", "plain", "#{pane_pid}"))
            os.killpg(pane_pid, signal.SIGKILL)
            tmux("kill-server")


def screen_text(tmux: Tmux, target: str) -> str:
    return "\n".join(row_text(row) for row in tmux.capture(target))


def drawn(tmux: Tmux, target: str) -> bool:
    """The sign-in box is on screen to its last line, and the screen holds still (a
    resize while Gemini still draws its first frames would test something else)."""
    first = screen_text(tmux, target)
    time.sleep(0.5)
    return SIGN_IN in first and "tos-privacy" in first and screen_text(tmux, target) == first


def same_screen(office: TmuxOffice, text: str) -> None:
    """Wait until both panes show `text` and the office pane is what tmux shows."""
    last: list[str] = []

    def matched() -> bool:
        got, want = office.office_screen(), office.ref_screen()
        shown = all(any(text in row_text(r) for r in grid) for grid in (got, want))
        last[:] = differences(got, want) if shown else [f"{text!r} not on both screens yet"]
        return not last

    try:
        wait_for(matched, "the same screen", 30)
    except AssertionError:
        pytest.fail(
            f"{office.layout} layout: the office pane differs from tmux:\n" + "\n".join(last)
        )


# --- 7 ------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (run scripts/setup)")
def test_on_screen_the_keyed_desk_is_a_gemini_session_not_its_sign_in(
    make_floor: Callable[..., GeminiFloor],
) -> None:
    """The office as a person opens it (the app in a real tmux at 160x48): jim's pane
    shows Gemini's own prompt (its sign-in screen would hold it back), under a title
    that says idle, and jim is on the map."""
    floor = make_floor([])
    tmux = Tmux(floor.root, {**tmux_env(floor.root), **floor.env})
    app = f"{BIN / 'hive-office'} --home {floor.home}"
    tmux("new-session", "-d", "-s", "office", "-x", "160", "-y", "48", "-c", str(floor.root), app)
    try:
        wait_for(lambda: floor.jim().get("status") == "idle", "jim's SessionStart", 90)
        tmux.keys("office", PREFIX_KEY, "2")

        def jim_pane() -> str | None:
            grid = tmux.capture("office")
            box = find_box(grid, "2 Jim · idle")
            if box is None:
                return None
            text = "\n".join(row_text(r) for r in crop(grid, box.top, box.left, box.rows, box.cols))
            return text if "Type your message" in text else None

        try:
            pane = wait_for(jim_pane, "jim's pane with Gemini's prompt", 60)
        except AssertionError as timed_out:
            # It timed out once in CI (never here): say what was on the screen and what
            # the office thought of jim.
            raise AssertionError(
                f"{timed_out}; jim: {floor.jim()}; the screen:\n{screen_text(tmux, 'office')}"
            ) from None
        assert SIGN_IN not in pane and "Existing API key detected" not in pane, pane
        assert "deprecated" not in pane, pane  # no warning about the office's settings
        assert "Jim" in screen_text(tmux, "office").split("2 Jim · idle")[0]  # on the map
    finally:
        floor.run("hive-office", "stop", "--home", str(floor.home))
        tmux.kill()


# --- 8 ------------------------------------------------------------------------------------

TYPED_KEY = "AIza-typed-in-the-pane-0123456789abcd"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (run scripts/setup)")
def test_without_a_key_the_sign_in_made_in_one_pane_serves_the_next_desk(
    make_floor: Callable[..., GeminiFloor],
) -> None:
    """No key anywhere, two gemini desks: jim's pane shows Gemini's own sign-in while pam
    waits for it (one sign-in, not two); the person picks "Use Gemini API Key" there and
    types a key, which Gemini keeps in the login file the office shares between its
    gemini desks. Pam then starts and asks nothing: she signs in with the same key."""
    floor = make_floor(
        [turn(user_says("hello office"), "Hi."), turn(user_says("hello from pam"), "Hi Pam.")],
        key=False,
        more=('\n[[agents]]\nid = "pam"\nname = "Pam"\nrole = "Engineer"\nprovider = "gemini"\n'),
    )
    # The scripted API's address for every desk of the office, pam's too (no key).
    floor.env["GOOGLE_GEMINI_BASE_URL"] = floor.model.base_url
    tmux = Tmux(floor.root, {**tmux_env(floor.root), **floor.env})
    app = f"{BIN / 'hive-office'} --home {floor.home}"
    tmux("new-session", "-d", "-s", "office", "-x", "160", "-y", "48", "-c", str(floor.root), app)

    def pane(title: str, text: str) -> str | None:
        grid = tmux.capture("office")
        box = find_box(grid, title)
        if box is None:
            return None
        shown = "\n".join(row_text(r) for r in crop(grid, box.top, box.left, box.rows, box.cols))
        return shown if text in shown else None

    def focus(key: str, title: str) -> None:
        tmux.keys("office", PREFIX_KEY, key)
        wait_for(lambda: find_box(tmux.capture("office"), title), f"the pane {title}", 30)

    try:
        # Gemini reports SessionStart before its sign-in screen is answered.
        wait_for(lambda: floor.jim().get("session_id"), "jim's SessionStart", 60)
        wait_for(lambda: find_box(tmux.capture("office"), "1 Michael"), "the app drawn", 60)
        focus("2", "2 Jim")
        wait_for(lambda: pane("2 Jim", SIGN_IN), "Gemini's sign-in in jim's pane", 60)
        # Pam is held back for jim's sign-in rather than asking in her own pane.
        pam = floor.run("hive-office", "why", "--home", str(floor.home), "pam", "--json")
        held = json.loads(pam.stdout)
        assert held["kind"] == "offline" and "Gemini sign-in in Jim's pane" in held["why"], held
        # Its session is reported, but it is not at its prompt: it waits for the person.
        signing = wait_for(lambda: (w := floor.why())["kind"] == "waiting" and w, "why", 30)
        assert "sign-in in its pane" in signing["why"], signing
        # One key at a time, each once the screen took the last (Gemini reads a burst of
        # keys as one paste).
        tmux.keys("office", "Down")
        wait_for(lambda: pane("2 Jim", "● 2. Use Gemini API Key"), "the key option", 30)
        tmux.keys("office", "Enter")
        wait_for(lambda: pane("2 Jim", "Paste your API key here"), "the key prompt", 30)
        floor.type(TYPED_KEY)  # pasted, then Enter: as the prompt asks
        wait_for(lambda: pane("2 Jim", "Type your message"), "jim's session", 60)
        wait_for(lambda: floor.why()["kind"] == "idle", "jim at its prompt, signed in", 30)
        floor.type("hello office")
        asked = floor.model.wait_for(lambda r: r.turn == 0, 60)
        assert asked.headers["x-goog-api-key"] == TYPED_KEY

        # The key is in the office's shared login file, not in any home of the person's.
        shared = floor.home / "agent-settings" / "gemini" / ".login" / "gemini-credentials.json"
        assert shared.is_file() and TYPED_KEY not in shared.read_text()  # Gemini encrypts it
        assert not (floor.root / "user" / ".gemini").exists()

        wait_for(
            lambda: floor.registry().get("pam", {}).get("status") == "idle",
            "pam's SessionStart",
            90,
        )
        focus("3", "3 Pam")
        shown = wait_for(lambda: pane("3 Pam", "Type your message"), "pam's session", 60)
        assert SIGN_IN not in shown and "Enter Gemini API Key" not in shown, shown
        floor.run("hive-office", "type", "--home", str(floor.home), "pam", "hello from pam")
        hers = floor.model.wait_for(lambda r: r.turn == 1, 60)
        assert hers.headers["x-goog-api-key"] == TYPED_KEY
    finally:
        floor.run("hive-office", "stop", "--home", str(floor.home))
        tmux.kill()


# --- 9 ------------------------------------------------------------------------------------

GH_COMMAND = f"gh run view 123 --log-failed --repo {REPO}"


def test_gh_run_view_is_read_from_the_ci_log_cache(
    make_floor: Callable[..., GeminiFloor],
) -> None:
    """BeforeTool's rewrite (hookSpecificOutput.tool_input): Gemini runs the cached
    `hive ci-logs view` instead of `gh run view`, which a fake `gh` is asked for once."""
    floor = make_floor(
        [
            turn(user_says("read the CI log"), shell(GH_COMMAND)),
            turn(tool_result_says("quasarflux"), shell(GH_COMMAND)),
            turn(has_tool_result(), "Read it."),
        ]
    )
    gh = FakeGh(floor.root / "fakebin")
    floor.env["PATH"] = f"{gh.folder}{os.pathsep}{floor.env['PATH']}"
    floor.serve()
    floor.type("read the CI log")
    first, second = (
        json.dumps(function_responses(floor.model.wait_for(answers(n), 90).body)) for n in (1, 2)
    )
    for result in (first, second):
        assert "FAILED test_timeout (quasarflux, attempt 1)" in result, result
    assert "fetched and kept" in first and "from the cache" in second
    assert len(gh.log_calls()) == 1, gh.calls()
    assert sum("through the CI-log cache" in d for d in floor.log()) == 2, floor.log()


def answers(n: int) -> Callable[[RecordedRequest], bool]:
    """The request that answers the scenario's turn `n`."""
    return lambda request: request.turn == n
