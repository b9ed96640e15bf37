"""A nudge from `hive send` to a running office: "look at this outbox now".

The watcher would find the file anyway; the kick only makes delivery immediate
without the router polling. Losing a kick loses nothing but latency.
"""

from __future__ import annotations

import socket

from hive_core.paths import HivePaths


def kick(paths: HivePaths, who: str) -> bool:
    """Tell a running office that `who`'s outbox changed. False if no office listens."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(who.encode("ascii", "replace"), str(paths.kick_socket))
        return True
    except OSError:
        return False
