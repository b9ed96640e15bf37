"""`run_client`: the app on screen as a client of an office that runs on its own (issue 11).

It attaches over run/client.sock (hive_tui/link.py's SocketLink), runs the app until
the person detaches (`ctrl+] d`), stops the office (`ctrl+] q`, then s) or the office
goes, and says how it ended. The office never depends on this process: a client killed
in any way changes nothing for it.
"""

from __future__ import annotations

import sys

from hive_core.config import ConfigError
from hive_core.paths import HivePaths
from hive_tui.link import LinkRefused, SocketLink


def run_client(paths: HivePaths) -> int:
    """Attach to the office of `paths` and show it until the person leaves; the exit
    code (1: refused, unreachable, or the office went away unasked)."""
    try:
        link = SocketLink.connect(paths)
    except LinkRefused as e:
        print(f"hive-office: {e}", file=sys.stderr)
        return 1
    except (OSError, ConfigError) as e:
        print(
            f"hive-office: cannot attach to the office of {paths.home} "
            f"({paths.client_socket}): {e}",
            file=sys.stderr,
        )
        return 1
    # Textual loads here, once attached: a refusal is said without it.
    from hive_tui.app import HiveApp

    app = HiveApp(link)
    app.run()
    if app.ended:
        print(app.ended, file=sys.stderr if app.return_code else sys.stdout)
    return app.return_code or 0
