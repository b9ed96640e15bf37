"""A nudge from `hive send` to a running office: "look at this outbox now".

The watcher would find the file anyway; the kick only makes delivery immediate
without the router polling. Losing a kick loses nothing but latency.
"""

from __future__ import annotations

# The C module, not `socket`: every `hive send` runs this, and `socket` adds an enum
# build and `selectors` to the start-up of a command that sends one datagram.
import _socket

from hive_core.paths import HivePaths


def kick(paths: HivePaths, who: str) -> bool:
    """Tell a running office that `who`'s outbox changed. False if no office listens."""
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    except OSError:
        return False
    try:
        sock.setblocking(False)
        sock.sendto(who.encode("ascii", "replace"), str(paths.kick_socket))
        return True
    except OSError:
        return False
    finally:
        sock.close()
