"""Plain data the widgets are fed with; Textual messages live beside the widgets that post them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentInfo:
    """What the map and the pane titles show of one agent."""

    id: str
    name: str
    role: str
    manager: bool = False
    status: str = (
        "offline"  # offline | running | idle | working | waiting | exited | archived | disconnected
    )
    last_tool: str | None = None
    unread: int = 0
    needs_you: bool = False  # a permission prompt is open, or mail needs the person
    paused: bool = False
    missing: str | None = None  # the CLI is not installed: what to do
    overlap: bool = False  # its branch touches a file another agent's branch touches
    uncontained: bool = False  # its CLI runs without the office's containment
