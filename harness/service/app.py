"""The FastAPI application: routers under /v1, the pages, error bodies, body-size limit, security headers."""

from __future__ import annotations

import contextlib
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from harness.service import grading
from harness.service.errors import ApiError
from harness.service.metrics import Metrics
from harness.service.report_cache import PageCache

log = logging.getLogger("grader.api")
# One limit: the submission's (grading.size_limit_text()). A request body may be twice that, room for the JSON
# escaping or the multipart framing around a file at the limit; a body over it is refused unread, and its 413
# states the submission's limit, like every other 413.
MAX_BODY = 2 * grading.max_source_bytes()
DRAIN_MAX = 8 * MAX_BODY                # a refused body up to this size is read (and dropped) before the 413
PAGE_UPLOADS = ("/submit",)             # form posts whose refusal is a page (pages.views.TOO_LARGE_KEY)
TOO_LARGE_KEY = "grader.body_too_large"
HEAD_KEPT = 64 * 1024                   # of a refused page upload, for the fields sent before the file
CSP = ("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


SECURITY_HEADERS = ((b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"))


class SecurityHeaders:
    """Pure ASGI middleware: the security headers on every response the app gives (each only where the response
    has not set its own). Pure ASGI rather than ``@app.middleware``: no task and stream per request (a status
    poll is the service's most frequent request)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def _send(msg):
            if msg["type"] == "http.response.start":
                headers = list(msg.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                msg = {**msg, "headers": headers}
            await send(msg)

        await self.app(scope, receive, _send)


class BodyLimit:
    """Pure ASGI middleware: a body larger than MAX_BODY is answered 413 before the app sees it (the rest of a
    body up to DRAIN_MAX is read and dropped first, so the client gets the answer rather than a reset)."""

    def __init__(self, app, limit: int = MAX_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        try:
            declared = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            declared = 0
        if declared > self.limit:
            return await self._too_large(scope, receive, send, more=declared <= DRAIN_MAX)
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body = msg.get("body", b"")
            size += len(body)
            if size > self.limit:
                return await self._too_large(scope, receive, send, more=msg.get("more_body", False),
                                             head=b"".join(chunks + [body])[:HEAD_KEPT])
            chunks.append(body)
            more = msg.get("more_body", False)
        data = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    @staticmethod
    async def _drain(receive) -> bytes:
        """Read the rest of the body (at most DRAIN_MAX) and drop it; the first HEAD_KEPT bytes are returned."""
        left, head = DRAIN_MAX, b""
        while left > 0:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
            body = msg.get("body", b"")
            left -= len(body)
            head = head if len(head) >= HEAD_KEPT else (head + body)[:HEAD_KEPT]
            if not msg.get("more_body", False):
                break
        return head

    async def _too_large(self, scope, receive, send, *, more: bool, head: bytes = b""):
        if more:   # read the rest (bounded) and drop it: a client still sending when we close would get a reset
            rest = await self._drain(receive)   # instead of the 413 (a browser shows a network error, not our page)
            head = (head + rest)[:HEAD_KEPT]
        app = scope.get("app")
        if app is not None:
            with contextlib.suppress(Exception):
                app.state.metrics.inc("grader_rejections_total", reason="too_large")
        if scope["path"] in PAGE_UPLOADS:   # a browser's upload: the page answers, given only the body's head
            async def empty():              # (the form's fields before the file: what the user had chosen)
                return {"type": "http.request", "body": b"", "more_body": False}

            return await self.app({**scope, TOO_LARGE_KEY: {"head": head}}, empty, send)
        err = ApiError(413, "too_large", f"the request is too large: a submission may be at most "
                                         f"{grading.size_limit_text()}")
        resp = JSONResponse(err.body(), status_code=413, headers={"Connection": "close"})
        await resp(scope, receive, send)


def create_app(settings, store, pool, *, metrics: Metrics | None = None, webhooks=None) -> FastAPI:
    from harness.service import docs, pages
    from harness.service.access_log import AccessLog
    from harness.service.api import candidates, exercises, exports, review, rounds, submissions, system, tokens
    from harness.service.retention import Retention

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        pool.start()
        retention = Retention(store, settings)
        retention.start()
        if webhooks is not None:
            webhooks.start()
        try:
            yield
        finally:
            if webhooks is not None:
                webhooks.stop()
            retention.stop()
            pool.stop()

    app = FastAPI(title="attention-grader", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description=f"Grades attention implementations; exercises: {grading.exercise_list()} "
                              "(GET /v1/exercises). Every endpoint but /healthz, /readyz, /docs and /openapi.json "
                              "needs `Authorization: Bearer <token>` (an interviewer or admin makes one with "
                              "`grade tokens create`).",
                  responses={401: {"model": None}})
    app.state.settings, app.state.store, app.state.pool = settings, store, pool
    app.state.metrics = metrics or Metrics()
    app.state.pages = PageCache()
    from harness.service.keys import server_key

    app.state.secret = server_key(settings.data_dir, "session")

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        app.state.metrics.inc("grader_rejections_total", reason="invalid")
        errs = [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", ""))} for e in exc.errors()]
        first = errs[0] if errs else {"loc": [], "msg": "invalid request"}
        err = ApiError(422, "invalid", f"{'.'.join(first['loc'][1:] or first['loc'])}: {first['msg']}",
                       details=errs)
        return JSONResponse(err.body(), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400:  # FastAPI's "error parsing the body": invalid input like any other, a 422
            err = ApiError(422, "invalid", f"the body could not be parsed: {exc.detail}")
            return JSONResponse(err.body(), status_code=422)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        err = ApiError(exc.status_code, code, str(exc.detail))
        return JSONResponse(err.body(), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    from sqlalchemy.exc import DBAPIError, TimeoutError as PoolTimeout

    async def _store_down(request: Request, exc: Exception):
        # the store (Postgres restarting, a failover, SQLite locked for too long) is briefly unreachable: the
        # client tries again later; nothing was half-written (every change is one transaction)
        log.warning("store unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        app.state.metrics.inc("grader_rejections_total", reason="store_unavailable")
        err = ApiError(503, "store_unavailable", "the store is unavailable; try again shortly")
        return JSONResponse(err.body(), status_code=503, headers={"Retry-After": "5"})

    app.add_exception_handler(DBAPIError, _store_down)
    app.add_exception_handler(PoolTimeout, _store_down)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        err = ApiError(500, "internal", "internal server error (logged)")
        return JSONResponse(err.body(), status_code=500)

    for r in (system.router, submissions.router, exports.router, exercises.router, tokens.router, rounds.router,
              candidates.router, review.router):
        app.include_router(r)
    app.include_router(pages.router)
    docs.install(app)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit)
    app.add_middleware(AccessLog)
    return app
