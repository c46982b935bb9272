"""One way to write a lifetime everywhere (token expiry, invitation expiry, round length, time limits): a
duration such as ``30d``, ``12h``, ``90m`` or ``45s``, or an ISO 8601 date or time (UTC when it has no zone)."""

from __future__ import annotations

import datetime as dt
import re

from harness.core.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhms])\s*$")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
FORMS = "a duration (30d, 12h, 90m, 45s) or an ISO 8601 date or time"


def parse_duration(value: str, what: str = "duration") -> dt.timedelta:
    m = _DURATION.match(str(value))
    if not m:
        raise UsageError(f"{what}: {value!r} is not a duration (30d, 12h, 90m, 45s)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not 0 < seconds <= 3650 * 86400:
        raise UsageError(f"{what}: {value!r} must be more than 0 and at most 3650 days")
    return dt.timedelta(seconds=seconds)


def parse_time(value: str, what: str = "time", *, base: dt.datetime | None = None) -> dt.datetime:
    """A naive-UTC datetime from a duration (counted from ``base``, default now), ``now`` or an ISO time."""
    t0 = base or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    text = str(value).strip()
    if text == "now":
        return t0
    if _DURATION.match(text):
        try:
            return t0 + parse_duration(text, what)
        except OverflowError:
            raise UsageError(f"{what}: {value!r} is too far away") from None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo else t
    except (ValueError, OverflowError):
        raise UsageError(f"{what}: {value!r} is not {FORMS}") from None
