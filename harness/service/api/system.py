"""/healthz, /readyz, /metrics."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from harness.service import grading
from harness.service.auth import Principal, staff
from harness.service.models import Health, Ready
from harness.service.api.common import error_responses

router = APIRouter(tags=["system"])
_SANDBOX_CACHE: dict = {}


@router.get("/healthz", response_model=Health)
def healthz():
    """The process answers."""
    return {"status": "ok"}


def _sandbox_check(sandbox: str) -> tuple[bool, str]:
    hit = _SANDBOX_CACHE.get(sandbox)
    if hit and time.monotonic() - hit[0] < 30:
        return hit[1]
    result = grading.sandbox_status(sandbox)
    _SANDBOX_CACHE[sandbox] = (time.monotonic(), result)
    return result


@router.get("/readyz", response_model=Ready, responses={503: {"model": Ready, "description": "not ready"}})
def readyz(request: Request):
    """Ready to grade: the store answers, the sandbox can run, the workers are alive."""
    checks = {}
    try:
        request.app.state.store.ping()
        checks["store"] = {"ok": True, "detail": "sqlite" if request.app.state.store.is_sqlite else "postgres"}
    except Exception as exc:
        checks["store"] = {"ok": False, "detail": type(exc).__name__}
    ok, detail = _sandbox_check(request.app.state.settings.sandbox)
    checks["sandbox"] = {"ok": ok, "detail": detail}
    stats = request.app.state.pool.stats()
    checks["workers"] = {"ok": bool(stats.get("healthy")), "detail": f"{stats.get('workers')} workers, "
                                                                       f"{stats.get('busy')} busy"}
    ready = all(c["ok"] for c in checks.values())
    return JSONResponse({"status": "ready" if ready else "not_ready", "checks": checks},
                        status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse, responses=error_responses(401, 403))
def metrics(request: Request, who: Principal = Depends(staff)):
    """Prometheus text format (interviewer or admin token)."""
    store, pool = request.app.state.store, request.app.state.pool
    counts = store.status_counts()
    depths = store.queue_depths()
    workers = pool.alive_workers() if hasattr(pool, "alive_workers") else []
    gauges = {"grader_queue_depth": ("Submissions queued (the store).", counts.get("queued", 0)),
              "grader_queue_depth_by_queue": ("Submissions queued in the store, per queue.",
                                              {(("queue", q),): n for q, n in depths.items()}),
              "grader_in_flight": ("Submissions being graded.", counts.get("running", 0)),
              "grader_workers_busy": ("Grading threads busy, over every live worker.",
                                      sum(w["busy"] for w in workers) if workers else pool.stats().get("busy", 0)),
              "grader_workers_alive": ("Workers whose heartbeat is recent.", len(workers)),
              "grader_worker_threads_alive": ("Grading threads of the live workers.",
                                              sum(w["concurrency"] for w in workers)),
              "grader_reports_by_verdict": ("Submissions graded, by verdict, over every worker (the store).",
                                            {(("verdict", v),): n for v, n in store.verdict_counts().items()}),
              "grader_infrastructure_errors": ("Submissions that ended in infrastructure_error (the store).",
                                               counts.get("infrastructure_error", 0))}
    broker = getattr(pool, "broker", None)
    bdepths = broker.depths() if broker is not None else None
    if bdepths is not None:
        gauges["grader_broker_queue_depth"] = ("Messages waiting in the broker, per queue.",
                                               {(("queue", q),): n for q, n in bdepths.items()})
    shared = store.counters()
    counters = {"grader_redeliveries_total": ("Messages delivered again: a grader's lease expired, or the broker "
                                              "lost the message and the reconciler sent it again.",
                                              shared.get("redeliveries", 0)),
                "grader_lease_expiries_total": ("Running submissions whose lease expired (their grader died).",
                                                shared.get("lease_expiries", 0))}
    return PlainTextResponse(request.app.state.metrics.render(gauges, counters),
                             media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/v1/workers", responses=error_responses(401, 403))
def workers(request: Request, who: Principal = Depends(staff)):
    """The grading workers seen in the last day, newest heartbeat first, like Judge0's /workers: host,
    concurrency, busy threads, graded count, last heartbeat, alive."""
    from harness.service import views

    pool = request.app.state.pool
    rows = request.app.state.store.list_workers()
    return {"workers": [views.worker_view(w, request.app.state.settings.heartbeat_s) for w in rows],
            "mode": pool.stats().get("mode", "embedded")}
