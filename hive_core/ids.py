"""Message ids: time-sortable, unique, and carrying their own creation time."""

from __future__ import annotations

import secrets
import threading
from datetime import UTC, datetime

_ID_TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
_lock = threading.Lock()
_last = ""


def new_message_id(now: datetime | None = None) -> str:
    """`20261130T093450123456Z-1a2b3c`: sorts by time; strictly increasing in one process."""
    global _last
    stamp = (now or datetime.now(UTC)).strftime(_ID_TIME_FORMAT)
    with _lock:
        candidate = f"{stamp}-{secrets.token_hex(3)}"
        if candidate <= _last:
            # Same microsecond (or a clock step back): keep the order by extending the last id.
            candidate = f"{_last.split('-')[0]}-{_last.split('-')[1]}{secrets.token_hex(1)}"
        _last = candidate
        return candidate


def created_at_of(message_id: str) -> str:
    """ISO-8601 UTC time encoded in an id made by new_message_id."""
    stamp = message_id.split("-", 1)[0]
    return (
        datetime.strptime(stamp, _ID_TIME_FORMAT)
        .replace(tzinfo=UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z")
    )


def is_message_id(value: str) -> bool:
    try:
        created_at_of(value)
    except ValueError:
        return False
    return bool(value) and "/" not in value and not value.startswith(".")


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
