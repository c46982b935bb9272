"""/v1/submissions: intake (JSON or multipart), status, reports, regrade, listing."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import datetime as dt
import json
import re
import secrets
import threading
import time
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from harness.service import callbacks, grading, review, rounds, views
from harness.service.auth import Principal, principal, staff
from harness.service.errors import ApiError
from harness.service.models import SubmissionJSON, SubmissionList, SubmissionOut
from harness.service.store.repository import Conflict, LimitReached
from harness.service.api.common import (error_responses, exercise_or_422, parse_cursor, parse_since, report_for, track_or_422,
                     visible_row)

router = APIRouter(prefix="/v1/submissions", tags=["submissions"])
_intake_lock = threading.Lock()
_FILENAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")
MAX_WAIT = 60.0
WOKEN_CHECK_S = 1.0   # ?wait in a process that grades in-process: the store is read when woken, else this often

_EXERCISE = {"type": "string", "enum": grading.exercise_names(),
             "description": "an exercise name (GET /v1/exercises); anything else is a 422 with a suggestion"}
_TRACK = {"type": "string", "enum": ["auto", *grading.TRACKS], "default": "auto",
          "description": "auto, or one of the exercise's tracks (GET /v1/exercises); another is a 422"}
_CALLBACK = {"type": "string", "pattern": "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!-~]*)?$", "maxLength": 2000,
             "description": "http(s) URL POSTed the summary when grading ends (interviewer/admin tokens only)"}
_MULTIPART_SCHEMA = {
    "type": "object", "required": ["file", "exercise"],
    "properties": {"file": {"type": "string", "format": "binary", "description": f"the .py file, UTF-8, at most {grading.size_limit_text()}"},
                   "exercise": _EXERCISE, "track": _TRACK, "candidate": {"type": "string", "maxLength": 200},
                   "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}, "callback_url": _CALLBACK,
                   "queue": {"type": "string", "enum": ["interactive", "bulk", "ci"], "default": "interactive"}}}


def _json_schema() -> dict:
    schema = SubmissionJSON.model_json_schema()
    props = schema["properties"]
    props["exercise"] = _EXERCISE
    props["track"] = _TRACK
    props["callback_url"] = {"anyOf": [_CALLBACK, {"type": "null"}], "default": None}
    props["source"] = {**props["source"], "pattern": "^[^\\x00]*$"}
    return schema


def _out(row: dict, who: Principal, report: dict | None = None) -> dict:
    v = views.submission_view(row, who.audience)
    v["report"] = report
    return v


async def _read_fields(request: Request) -> tuple[dict, bytes, str]:
    """(fields, source bytes, filename) from a JSON or multipart body; 415/422 otherwise."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            raw = json.loads(await request.body())
        except RecursionError:   # 200,000 nested brackets fit under the size limit: input, not a server fault
            raise ApiError(422, "invalid", "the body is nested too deeply to be a submission") from None
        except ValueError:
            raise ApiError(422, "invalid", "the body is not valid JSON") from None
        if not isinstance(raw, dict):
            raise ApiError(422, "invalid", "the body must be a JSON object")
        try:
            body = SubmissionJSON.model_validate(raw)
        except ValidationError as exc:
            e = exc.errors()[0]
            raise ApiError(422, "invalid", f"{'.'.join(map(str, e['loc']))}: {e['msg']}") from None
        try:
            data = body.source.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, "invalid_source", "the submission is not UTF-8 text (lone surrogates)") from None
        fields = body.model_dump(exclude={"source"})
        return fields, data, body.filename or "submission.py"
    if ctype == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=20)
        except Exception as exc:
            raise ApiError(422, "invalid", f"the multipart body could not be parsed ({type(exc).__name__})") from None
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise ApiError(422, "invalid", "file: a multipart field 'file' with the Python file is required")
        data = await upload.read()
        fields = {}
        for key in ("exercise", "track", "candidate", "seed", "callback_url", "queue"):
            v = form.get(key)
            if v is not None and not isinstance(v, str):
                raise ApiError(422, "invalid", f"{key}: must be a text field")
            fields[key] = v if v not in ("",) else None
        if fields.get("exercise") is None:
            raise ApiError(422, "invalid", "exercise: field required")
        if fields.get("seed") is not None:
            s = fields["seed"]
            if not s.isdigit() or int(s) > 2**32 - 1:
                raise ApiError(422, "invalid", "seed: must be an integer from 0 to 4294967295")
            fields["seed"] = int(s)
        for key, limit in (("exercise", 64), ("track", 16), ("candidate", 200), ("callback_url", 2000), ("queue", 16)):
            if fields.get(key) is not None and len(fields[key]) > limit:
                raise ApiError(422, "invalid", f"{key}: at most {limit} characters")
        fields["track"] = fields.get("track") or "auto"
        return fields, data, upload.filename or "submission.py"
    raise ApiError(415, "unsupported_media_type", "send application/json (with 'source') or multipart/form-data "
                                                  "(with 'file')")


def _check_callback(url: str | None, who: Principal, allow: tuple) -> str | None:
    if url is None:
        return None
    if not who.is_staff:
        raise ApiError(403, "forbidden", "callback_url: only interviewer or admin tokens may set a webhook")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or not parts.hostname:
        raise ApiError(422, "invalid_callback_url", "callback_url: must be an absolute http(s) URL")
    why = callbacks.literal_refusal(url, allow)   # a host name is resolved and checked at every delivery
    if why:
        raise ApiError(422, "invalid_callback_url", f"callback_url: {why}")
    return url


def _seed_for(value: int | None, who: Principal) -> int:
    """A fresh random seed for every submission (so no two gradings of one file draw the same inputs, and
    resubmitting cannot be used to pick inputs that miss a bug); only staff may name one (a replay)."""
    if value is None:
        return secrets.randbelow(2**32)
    if not who.is_staff:
        raise ApiError(403, "forbidden", "seed: only interviewer or admin tokens may choose the seed")
    return value


QUEUE_NAMES = ("interactive", "bulk", "ci")


def _queue_for(value: str | None, who: Principal) -> str:
    """Candidates' submissions are interactive; staff may send bulk work (regrades, CI batches) to the lower
    priority queues."""
    if value in (None, ""):
        return "interactive"
    if value not in QUEUE_NAMES:
        raise ApiError(422, "invalid", f"queue: unknown queue {value!r}{grading.did_you_mean(value, QUEUE_NAMES)}")
    if value != "interactive" and not who.is_staff:
        raise ApiError(403, "forbidden", "queue: candidate submissions are always interactive")
    return value


def _staff_candidate(store, value: str | None) -> tuple[str | None, str | None]:
    """(display name, candidate id) for staff's ``candidate`` field: a candidate id binds the submission to that
    candidate; anything else is only a label (it grants no candidate access)."""
    from harness.service.store import candidates

    found = candidates.get(store, value) if value and value.startswith("cand_") else None
    return (found["display_name"], found["id"]) if found else (value, None)


def _intake(request: Request, who: Principal, fields: dict, data: bytes, filename: str, key: str | None):
    store = request.app.state.store
    exercise = exercise_or_422(fields["exercise"])
    track = track_or_422(fields.get("track") or "auto", exercise=exercise)
    try:
        source = grading.vet_source(data)
    except grading.UsageError as exc:
        status = exc.context.get("status", 422)
        request.app.state.metrics.inc("grader_rejections_total", reason="too_large" if status == 413 else "invalid")
        raise ApiError(status, "too_large" if status == 413 else "invalid_source", exc.message) from None
    stub = grading.unchanged_stub(exercise, source)
    if stub is not None:   # a first-time candidate's easy slip: nothing to grade yet, nothing stored
        request.app.state.metrics.inc("grader_rejections_total", reason="invalid")
        entry = grading.exercise_summary(exercise)["tracks"][stub]["signature"]
        raise ApiError(422, "unchanged_stub", f"this is the unchanged {exercise} stub ({stub} track): implement "
                                              f"{entry} in it, then submit it")
    callback = _check_callback(fields.get("callback_url"), who, request.app.state.settings.webhook_allow)
    queue = _queue_for(fields.get("queue"), who)
    if who.role == "candidate":
        if fields.get("candidate") not in (None, who.candidate, who.candidate_id):
            raise ApiError(403, "forbidden", "a candidate token submits only for its own candidate")
        candidate, candidate_id = who.candidate, who.candidate_id
    else:
        candidate, candidate_id = _staff_candidate(store, fields.get("candidate"))
        if candidate is not None and len(candidate) > 200:   # the pages' form too (Postgres would refuse it later)
            raise ApiError(422, "invalid", "candidate: at most 200 characters")
    resolved = grading.detect_track(source, exercise) if track == "auto" else track
    filename = (_FILENAME_BAD.sub("_", filename.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]) or "submission.py")[:200]
    seed = _seed_for(fields.get("seed"), who)
    kw = dict(exercise=exercise, track_requested=track, track=resolved, candidate=candidate, filename=filename,
              seed=seed, callback_url=callback, source=source, token_id=who.token_id, idempotency_key=key,
              queue=queue, candidate_id=candidate_id)
    lim = request.app.state.settings
    # the round's admission and the insert one at a time per candidate (rounds.serialized); the limits are counted
    # in the store, in the insert's own transaction, so they hold across API processes
    with _intake_lock, rounds.serialized(store, who):
        try:
            if key:
                found = store.find_by_key(who.token_id, key)
                if found is not None:
                    return store.check_same(found, hashlib.sha256(data).hexdigest(), exercise), False
            kw["round_id"] = rounds.admit(store, who, exercise, resolved)   # 403 before anything is stored
            return store.create_submission(**kw, limits={"queue_max": lim.queue_max,
                                                         "max_in_flight": lim.max_in_flight,
                                                         "rate_per_minute": lim.rate_per_minute})
        except Conflict as exc:
            raise ApiError(409, "idempotency_conflict", str(exc)) from None
        except LimitReached as exc:
            request.app.state.metrics.inc("grader_rejections_total", reason=exc.reason)
            raise ApiError(503 if exc.reason == "queue_full" else 429,
                           {"queue_full": "queue_full", "in_flight": "too_many_in_flight",
                            "rate_limit": "rate_limited"}[exc.reason],
                           exc.message, headers={"Retry-After": str(exc.retry_after)}) from None


@router.post("", status_code=202, response_model=SubmissionOut,
             responses={200: {"model": SubmissionOut, "description": "graded within ?wait=S (report included) or "
                                                                     "an Idempotency-Key replay"},
                        **error_responses(401, 403, 409, 413, 415, 422, 429, 503)},
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": _json_schema()},
                 "multipart/form-data": {"schema": _MULTIPART_SCHEMA}}}})
async def create_submission(request: Request, wait: float = Query(0, ge=0, le=MAX_WAIT),
                            idempotency_key: str | None = Header(None, max_length=200),
                            who: Principal = Depends(principal)):
    """Submit a file for grading. The submission is stored before the answer; 202 with its id and links, or
    the report if it is graded within `wait` seconds."""
    fields, data, filename = await _read_fields(request)
    key = (idempotency_key or "").strip() or None    # an empty key is no key
    row, created = await run_in_threadpool(_intake, request, who, fields, data, filename, key)
    if created:
        request.app.state.metrics.inc("grader_submissions_total", exercise=row["exercise"])
        await run_in_threadpool(request.app.state.pool.enqueue, row["id"], row["queue"])
    row = await _wait_for(request, row, wait)
    report = None
    store = request.app.state.store
    if row["status"] == "done" and wait:
        report = rounds.report_json(store, who, row, report_for(row, "interviewer"))
    code = 200 if row["status"] in ("done", "infrastructure_error") or not created else 202
    return JSONResponse(_out(rounds.row_for(store, who, row), who, report), status_code=code,
                        headers={"Location": f"/v1/submissions/{row['id']}"})


async def _wait_for(request: Request, row: dict, wait: float) -> dict:
    deadline = time.monotonic() + min(wait, MAX_WAIT)
    store = request.app.state.store
    if row["status"] not in ("queued", "running") or not wait:
        return row
    pool = request.app.state.pool
    finished = getattr(pool, "finished", None)   # graded in this process: woken at once
    # A process that grades what it enqueues (embedded) is woken when the grading ends: the store is read then,
    # and once a second in case another process of the store graded it (a reconciler's redelivery). Otherwise a
    # warm grading takes a few hundred ms: look often at first, then every 0.2 s.
    woken = finished is not None and getattr(pool, "in_process", False)
    with finished.watch(row["id"]) if finished is not None else contextlib.nullcontext() as done:
        pause = WOKEN_CHECK_S if woken else 0.01
        while row["status"] in ("queued", "running") and time.monotonic() < deadline:
            left = max(0.0, deadline - time.monotonic())
            if done is None:
                await asyncio.sleep(min(pause, left))
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(done.wait(), min(pause, left))
                done.clear()
            pause = pause if woken else min(0.2, pause * 1.5)
            row = await run_in_threadpool(store.get, row["id"])
    return row


@router.get("", response_model=SubmissionList, responses=error_responses(401, 422))
def list_submissions(request: Request, exercise: str | None = Query(None, max_length=64),
                     candidate: str | None = Query(None, max_length=200,
                                                   description="a case-insensitive part of the display name"),
                     verdict: str | None = Query(None, pattern="^(passed|failed|error)$"),
                     status: str | None = Query(None, pattern="^(queued|running|done|infrastructure_error)$"),
                     since: dt.datetime | None = Query(None, description="ISO 8601; received at or after"),
                     limit: int = Query(50, ge=1, le=200), cursor: str | None = Query(None, max_length=20),
                     who: Principal = Depends(principal)):
    """Newest first. Candidates see only their own submissions."""
    candidate_id = None
    if not who.is_staff:
        candidate, candidate_id = None, who.candidate_id or ""
    rows = request.app.state.store.list_submissions(exercise=exercise, candidate=candidate or None,
                                                    candidate_id=candidate_id, verdict=verdict,
                                                    status=status, since=parse_since(since), limit=limit + 1,
                                                    cursor=parse_cursor(cursor))
    more = len(rows) > limit
    rows = rows[:limit]
    store = request.app.state.store
    return {"items": [_out(rounds.row_for(store, who, r), who) for r in rows],
            "next_cursor": str(rows[-1]["seq"]) if more else None}


@router.get("/{sub_id}", response_model=SubmissionOut, responses=error_responses(401, 404))
def get_submission(sub_id: str, request: Request, who: Principal = Depends(principal)):
    return _out(rounds.row_for(request.app.state.store, who, visible_row(request, who, sub_id)), who)


@router.get("/{sub_id}/report", responses={200: {"description": "the report (schema "
                                                                "attention-grader/report/v1), for the caller's "
                                                                "audience", "content": {"application/json": {
                                                                    "schema": {"type": "object"}}}},
                                           **error_responses(401, 403, 404, 409)})
def get_report(sub_id: str, request: Request,
               audience: str | None = Query(None, pattern="^(interviewer|candidate)$"),
               who: Principal = Depends(principal)):
    """The JSON report. Candidates always get the candidate view (hidden tests' messages and inputs removed);
    interviewers may ask for it with `?audience=candidate`."""
    row = visible_row(request, who, sub_id)
    if who.is_staff:
        return JSONResponse(report_for(row, audience or "interviewer").to_dict())
    return JSONResponse(rounds.report_json(request.app.state.store, who, row, report_for(row, "interviewer")))


@router.get("/{sub_id}/report.html", response_class=HTMLResponse,
            responses=error_responses(401, 403, 404, 409))
def get_report_html(sub_id: str, request: Request,
                    audience: str | None = Query(None, pattern="^(interviewer|candidate)$"),
                    who: Principal = Depends(principal)):
    """The self-contained HTML report (plots, highlighted source)."""
    row = visible_row(request, who, sub_id)
    aud = "candidate" if not who.is_staff else (audience or "interviewer")
    report = report_for(row, "interviewer")
    if not who.is_staff:
        policy = rounds.policy(request.app.state.store, who, row)
        if policy == "received":
            return HTMLResponse(views.received_html(row), headers={"Cache-Control": "no-store"})
        if policy == "summary":
            page, rendered = request.app.state.pages.get_or_render(
                (sub_id, "summary", row["lease"]), lambda: grading.report_html(
                    rounds.summary_report(report), audience="candidate", source=row["source"], npz=None))
            if rendered:
                request.app.state.metrics.inc("grader_report_renders_total")
            return HTMLResponse(page)

    def render() -> str:
        npz = request.app.state.store.get_artifact(sub_id)
        return grading.report_html(report, audience=aud, source=row["source"], npz=npz)
    page, rendered = request.app.state.pages.get_or_render((sub_id, aud, row["lease"]), render)
    if rendered:
        request.app.state.metrics.inc("grader_report_renders_total")
    page = review.with_whose(page, review.whose(request.app.state.store, row, staff=who.is_staff))
    return HTMLResponse(page)


@router.post("/{sub_id}/regrade", status_code=202, response_model=SubmissionOut,
             responses=error_responses(401, 403, 404, 409))
def regrade(sub_id: str, request: Request, who: Principal = Depends(staff),
            seed: int | None = Query(None, ge=0, le=2**32 - 1,
                                     description="draw the inputs with this seed (default: the stored one)"),
            reason: str | None = Query(None, max_length=500, description="why (kept with the earlier version)")):
    """Grade the stored file again (interviewer or admin); the old report is kept as an earlier version
    (/v1/review/submissions/{id}/versions). Without `seed` the inputs are those of the first grading."""
    row = visible_row(request, who, sub_id)
    if row["status"] == "running":
        raise ApiError(409, "running", "this submission is being graded right now", headers={"Retry-After": "5"})
    from harness.service.store import review as store_review

    store_review.keep_version(request.app.state.store, sub_id, by=f"{who.name} ({who.id})", reason=reason)
    row = request.app.state.store.regrade(sub_id, queue="bulk", seed=seed)
    if row["status"] != "queued":
        raise ApiError(409, "running", "this submission is being graded right now", headers={"Retry-After": "5"})
    request.app.state.pool.enqueue(sub_id, "bulk")
    return JSONResponse(_out(row, who), status_code=202)
