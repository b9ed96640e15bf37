"""Issue 23 (pure): the office's problems as the screen shows them. Desks that failed
to start for one cause are one line and pop up once; a cause another line already says
(the office's login line) is folded into it; other problems are as they were."""

from __future__ import annotations

from hive_core.desks.supervisor import NO_LOGIN_HINT, start_failure
from hive_tui.problems import news, shown

LOGIN = "No Claude login: log in once in Michael's pane."


def test_one_failure_is_its_own_line() -> None:
    failed = start_failure(1, 0.9, LOGIN)
    [line] = shown({"agent:michael": failed})
    assert line.text == f"agent:michael: {failed}"


def test_desks_failing_alike_are_one_line_and_pop_up_once() -> None:
    first = shown({"agent:michael": start_failure(1, 0.9, "Set a key.")})
    both = shown(
        {
            "agent:michael": start_failure(1, 0.9, "Set a key."),
            "agent:jim": start_failure(1, 1.3, "Set a key."),
            "agent:pam": start_failure(2, 0.2, "Fix its command."),
        }
    )
    assert [s.text for s in both] == [
        "michael, jim: exited right after they started. Set a key.",
        "agent:pam: " + start_failure(2, 0.2, "Fix its command."),
    ]
    new, cleared = news(first, both)
    # Jim failing like Michael is no news; Pam's other cause is.
    assert [s.label for s in new] == ["agent:pam"]
    assert cleared == []
    # The same set again: nothing pops up.
    assert news(both, both) == ([], [])


def test_a_desk_without_a_login_is_folded_into_the_login_line_which_never_pops_up() -> None:
    no_login = start_failure(1, 0.9, NO_LOGIN_HINT)
    problems = {"login": LOGIN, "agent:michael": no_login, "commit": "git refused: disk full"}
    lines = shown(problems)
    assert [s.text for s in lines] == [
        f"login: {LOGIN} (michael: exited right after it started)",
        "commit: git refused: disk full",
    ]
    # The desk failing first, then the login line: neither pops up (the line is the
    # notice); the desk's line, folded, has not "cleared".
    alone = shown({"agent:michael": no_login})
    assert news([], alone) == ([], [])
    new, cleared = news(alone, lines)
    assert ([s.label for s in new], cleared) == (["commit"], [])
    # The login found: its line clears.
    new, cleared = news(lines, shown({"commit": "git refused: disk full"}))
    assert (new, [s.label for s in cleared]) == ([], ["login"])


def test_a_group_losing_a_member_has_not_cleared() -> None:
    both = shown(
        {
            "agent:michael": start_failure(1, 0.9, "Set a key."),
            "agent:jim": start_failure(1, 1.3, "Set a key."),
        }
    )
    jim = shown({"agent:jim": start_failure(1, 1.3, "Set a key.")})
    assert news(both, jim) == ([], [])
    assert [s.label for s in news(jim, [])[1]] == ["agent:jim"]


def test_a_changed_detail_is_news_as_before() -> None:
    one = shown({"loop:route": "failed; restarted 1 time(s)"})
    two = shown({"loop:route": "failed; restarted 2 time(s)"})
    assert [s.text for s in news(one, two)[0]] == ["loop:route: failed; restarted 2 time(s)"]
