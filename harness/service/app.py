"""The FastAPI application: routers under /v1, the pages, error bodies, body-size limit, security headers."""

from __future__ import annotations

import contextlib
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from harness.service.errors import ApiError
from harness.service.metrics import Metrics
from harness.service.report_cache import PageCache

log = logging.getLogger("grader.api")
MAX_BODY = 2 * 1024 * 1024   # a request body; the submission itself is capped at 1 MB (413 either way)
CSP = ("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


class BodyLimit:
    """Pure ASGI middleware: a body larger than MAX_BODY is answered 413 before the app reads it."""

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
            return await self._too_large(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body = msg.get("body", b"")
            size += len(body)
            if size > self.limit:
                return await self._too_large(scope, receive, send)
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

    async def _too_large(self, scope, receive, send):
        app = scope.get("app")
        if app is not None:
            with contextlib.suppress(Exception):
                app.state.metrics.inc("grader_rejections_total", reason="too_large")
        err = ApiError(413, "too_large", f"the request body is over {self.limit} bytes; a submission may be "
                                         "at most 1 MB")
        resp = JSONResponse(err.body(), status_code=413, headers={"Connection": "close"})
        await resp(scope, receive, send)


def create_app(settings, store, pool, *, metrics: Metrics | None = None, webhooks=None) -> FastAPI:
    from harness.service import pages
    from harness.service.access_log import AccessLog
    from harness.service.api import candidates, exercises, exports, rounds, submissions, system, tokens

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        pool.start()
        if webhooks is not None:
            webhooks.start()
        try:
            yield
        finally:
            if webhooks is not None:
                webhooks.stop()
            pool.stop()

    app = FastAPI(title="attention-grader", version="1", lifespan=lifespan,
                  description="Grades attention implementations (MHA, masked MHA, cross-attention, GQA). Every "
                              "endpoint but /healthz, /readyz, /docs and /openapi.json needs "
                              "`Authorization: Bearer <token>` (`grade tokens create`).",
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

    @app.middleware("http")
    async def _headers(request: Request, call_next):
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Frame-Options", "DENY")
        if request.url.path in ("/docs",):
            del response.headers["Content-Security-Policy"]  # swagger UI loads its own scripts
        return response

    for r in (system.router, submissions.router, exports.router, exercises.router, tokens.router, rounds.router,
              candidates.router):
        app.include_router(r)
    app.include_router(pages.router)
    app.add_middleware(BodyLimit)
    app.add_middleware(AccessLog)
    return app
