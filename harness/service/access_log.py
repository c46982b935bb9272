"""The access log: one line per request — method, path (never the query string, which may carry names or
secrets), status, duration and the principal's id (``token:N``; ``-`` when anonymous). Never a secret: tokens,
session ids and invitation codes travel in headers, cookies, bodies or query strings, none of which is logged."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("grader.access")


class AccessLog:
    """Pure ASGI middleware (uvicorn's own access log, which prints the query string, is turned off)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.monotonic()
        status = [500]

        async def _send(msg):
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, _send)
        finally:
            who = (scope.get("state") or {}).get("principal")
            log.info("%s %s %d %.1fms %s", scope["method"], scope["path"], status[0],
                     (time.monotonic() - t0) * 1000, who.id if who is not None else "-")
