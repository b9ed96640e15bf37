"""Two clients of different sizes, as in tmux: the office sizes a pane's pty to the
smaller client, and the larger client's pane shows the pty's area and marks the room
beyond it as tmux marks a window smaller than its client (an edge, a corner, dots).

The reference is tmux itself: an inner tmux (window-size smallest, the office's rule;
no status line, so a client's size is its window's) with two clients attached, each in
a session of the outer tmux sized to one office client's pane interior. The same bash
and the same command run in the office's pane and the inner tmux's window; the larger
client's pane is compared with the larger tmux client's screen, cell by cell. When the
smaller client leaves, both grow back.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support import short_dir, wait_for
from tests.tmux_support import (
    AGENTS,
    BIN,
    CHILD_TERM,
    PREFIX_KEY,
    PS1,
    SHELL,
    Box,
    Cell,
    Grid,
    TmuxOffice,
    crop,
    differences,
    find_box,
    row_text,
)

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux not installed (scripts/setup installs it)"
)

MATCH_S = 10.0


class InnerTmux:
    """A tmux of its own whose clients run in sessions of the office's tmux."""

    def __init__(self, office: TmuxOffice) -> None:
        root = office.root
        conf = root / "inner.conf"
        conf.write_text(
            "set -g default-terminal tmux-256color\nset -g status off\n"
            "set -g window-size smallest\n"
        )
        self.base = ["tmux", "-S", str(root / "inner.sock"), "-f", str(conf)]
        self.office = office
        terminal = [f"{k}={v}" for k, v in CHILD_TERM.items()]
        shell = ["env", "-u", "TMUX", "-u", "TMUX_PANE", *terminal, f"PS1={PS1}", *SHELL]
        self._run("new-session", "-d", "-s", "w", "-c", str(root), shlex.join(shell))

    def _run(self, *args: str) -> None:
        subprocess.run([*self.base, *args], check=True, capture_output=True, env=self.office.env)

    def attach(self, session: str, box: Box) -> None:
        """A client of the inner tmux in `session` of the office's tmux, `box` big."""
        attach = shlex.join(["env", "-u", "TMUX", *self.base, "attach", "-t", "w"])
        self.office.tmux(
            "new-session", "-d", "-s", session, "-x", str(box.cols), "-y", str(box.rows), attach
        )  # fmt: skip

    def respawn(self) -> None:
        terminal = [f"{k}={v}" for k, v in CHILD_TERM.items()]
        shell = ["env", "-u", "TMUX", "-u", "TMUX_PANE", *terminal, f"PS1={PS1}", *SHELL]
        self._run("respawn-pane", "-k", "-t", "w", shlex.join(shell))

    def type(self, text: str) -> None:
        self._run("send-keys", "-t", "w", "-l", text)
        self._run("send-keys", "-t", "w", "Enter")


@pytest.fixture
def offices() -> Iterator[tuple[TmuxOffice, Box]]:
    """The office with its larger client (session `office`) and a smaller second
    client (session `small`); the smaller client's pane box."""
    with short_dir() as root:
        office = TmuxOffice(root, cols=120, rows=40)
        try:
            app = [str(BIN / "hive-office"), "--home", str(office.home)]
            office.tmux(
                "new-session", "-d", "-s", "small", "-x", "90", "-y", "30", shlex.join(app)
            )  # fmt: skip
            small = wait_for(
                lambda: find_box(office.tmux.capture("small"), f"1 {AGENTS[0][1]}"),
                "the second client's pane",
                60,
            )
            yield office, small
        finally:
            office.close()


def _same(office: TmuxOffice, reference: str, what: str) -> None:
    box = office.box
    last: list[str] = []

    def matched() -> bool:
        got: Grid = crop(office.tmux.capture("office"), box.top, box.left, box.rows, box.cols)
        want: Grid = crop(office.tmux.capture(reference), 0, 0, box.rows, box.cols)
        last[:] = differences(got, want)
        return not last

    try:
        wait_for(matched, what, MATCH_S)
    except AssertionError:
        pytest.fail(f"{what}: the office pane differs from tmux:\n" + "\n".join(last))


def test_a_pane_shrunk_by_a_smaller_client_is_marked_as_tmux_marks_it(
    offices: tuple[TmuxOffice, Box],
) -> None:
    office, small = offices
    big = office.box
    assert (small.rows, small.cols) < (big.rows, big.cols)
    inner = InnerTmux(office)
    inner.attach("tmux-big", big)
    inner.attach("tmux-small", small)
    for run in (inner.type, lambda text: office.tmux.type("office", text)):
        run("clear; seq 1 200")
    _same(office, "tmux-big", "the larger client with a smaller one attached")
    # The pane really is the pty's size: its last row and column are marked.
    screen = crop(office.tmux.capture("office"), big.top, big.left, big.rows, big.cols)
    assert row_text(screen[small.rows]).startswith("─" * small.cols + "┘")
    assert set(row_text(screen[-1])) == {"·"}

    # The agent's CLI ends and is started again: the new one has the pty's size too.
    office.tmux.type("office", "exit")
    wait_for(lambda: "exited" in row_text(_title(office)), "the agent to exit")
    office.tmux.keys("office", PREFIX_KEY, "r")
    inner.respawn()
    wait_for(lambda: "exited" not in row_text(_title(office)), "the agent to start again")
    office.wait_prompt("office")
    for run in (inner.type, lambda text: office.tmux.type("office", text)):
        run("clear; seq 1 250")
    _same(office, "tmux-big", "the larger client after the agent started again")

    # The smaller clients leave: the pane (and tmux's window) grow back, unmarked.
    office.tmux.keys("small", PREFIX_KEY, "d")
    wait_for(
        lambda: office.tmux("display", "-p", "-t", "small", "#{pane_dead}").strip() == "1",
        "the smaller client to detach",
    )
    office.tmux("kill-session", "-t", "tmux-small")
    for run in (inner.type, lambda text: office.tmux.type("office", text)):
        run("clear; seq 1 300")
    _same(office, "tmux-big", "the larger client alone again")
    screen = crop(office.tmux.capture("office"), big.top, big.left, big.rows, big.cols)
    assert not any("·" in row_text(row) for row in screen)


def _title(office: TmuxOffice) -> list[Cell]:
    """The top border of the office's pane, which says how its agent is."""
    return office.tmux.capture("office")[office.box.top - 1]
