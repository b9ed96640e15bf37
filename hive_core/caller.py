"""Who is calling the `hive` CLI, proven where it can be.

An agent's environment holds HIVE_AGENT_ID and the secret the office minted for its
current start (HIVE_SECRET). While the office runs, a caller claiming to be an agent
must prove it with that secret over the control socket; with no office running the
claim is taken as it stands (nothing else could check it). Outside an agent, with no
HIVE_AGENT_ID at all, the caller is the person (`human`).

This is the same-user trust boundary: it keeps mistakes and stale processes from
acting as someone else and keeps provenance honest; it does not stop a hostile process
of the same user, which could read another agent's environment.
"""

from __future__ import annotations

import os

from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, ControlRequest, OfficeConfig


class CallerError(Exception):
    """The caller's identity is missing, unknown or unproven; the message says what to do."""


def authenticated_caller(paths: HivePaths, config: OfficeConfig) -> str:
    if "HIVE_AGENT_ID" not in os.environ:
        return HUMAN
    claimed = os.environ["HIVE_AGENT_ID"].strip()
    if not claimed:
        raise CallerError(
            "HIVE_AGENT_ID is set but empty; unset it to act as the person, or set it "
            "to your agent id."
        )
    if claimed == HUMAN:
        return HUMAN
    if claimed not in {a.id for a in config.agents}:
        ids = ", ".join(a.id for a in config.agents)
        raise CallerError(
            f"HIVE_AGENT_ID is {claimed!r}, which is not an agent of this office ({ids})."
        )
    # Here, not at the top: the control module carries the office's asyncio server, and
    # only a claim that needs proving should pay for importing it.
    from hive_core import control

    try:
        reply = control.request(
            paths.control_socket,
            ControlRequest(cmd="whoami", agent=claimed, secret=os.environ.get("HIVE_SECRET", "")),
            timeout=5,
        )
    except (ConnectionError, OSError):
        return claimed  # no office running: nothing to check the claim against
    if not reply.ok:
        raise CallerError(reply.error or f"the office could not confirm that you are {claimed}.")
    return claimed
