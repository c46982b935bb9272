"""Times on the pages: relative ("5 min ago") in the text, the exact time on hover, in the reader's own time
zone. The server writes ``<time datetime="ISO" title="... UTC">``; the pages' one script (allowed by its hash in
the Content-Security-Policy) rewrites each title to the browser's local time. The API keeps ISO 8601 (UTC)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib

from markupsafe import Markup, escape

SCRIPT = ('document.querySelectorAll("time[datetime]").forEach(function(t){var d=new Date(t.getAttribute('
          '"datetime"));if(!isNaN(d.getTime())){t.title=d.toLocaleString()+" (your time)";}});')


def script_hash() -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode() + "'"


def _parse(value) -> dt.datetime | None:
    if not value:
        return None
    if isinstance(value, dt.datetime):
        t = value
    else:
        try:
            t = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def relative(t: dt.datetime, now: dt.datetime) -> str:
    s = (now - t).total_seconds()
    if s < -60:   # a time to come (a round's close): "in 45 min", "in 3 h", "in 2 days"
        ahead = -s
        if ahead < 3600:
            return f"in {int(ahead // 60)} min"
        if ahead < 86400:
            return f"in {int(ahead // 3600)} h"
        return f"in {int(ahead // 86400)} day{'s' if ahead >= 2 * 86400 else ''}"
    if s < 10:
        return "just now"
    if s < 60:
        return f"{int(s)} s ago"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{int(s // 3600)} h ago"
    if s < 7 * 86400:
        days = int(s // 86400)
        return f"{days} day{'s' if days > 1 else ''} ago"
    return t.strftime("%Y-%m-%d")


def when(value, now: dt.datetime | None = None, *, exact: bool = False) -> Markup:
    """``<time>`` for an ISO string or datetime (empty for none); ``exact``: the text is the UTC time itself (a
    deadline next to a countdown), not a relative one."""
    t = _parse(value)
    if t is None:
        return Markup("")
    now = now or dt.datetime.now(dt.timezone.utc)
    iso = t.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    stamp = t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = t.astimezone(dt.timezone.utc).strftime("%H:%M UTC" if t.date() == now.date() else "%Y-%m-%d %H:%M UTC") \
        if exact else relative(t, now)
    return Markup('<time datetime="{}" title="{}">{}</time>').format(escape(iso), escape(stamp), escape(text))
