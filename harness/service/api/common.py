"""Helpers shared by the routers."""

from __future__ import annotations

import datetime as dt

from fastapi import Request

from harness.service import grading
from harness.service.auth import Principal, can_see
from harness.service.errors import ApiError

ERROR_SCHEMA = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["status", "code", "message"],
    "properties": {"status": {"type": "integer"}, "code": {"type": "string"}, "message": {"type": "string"},
                   "details": {}}}}}


def error_responses(*codes: int) -> dict:
    """OpenAPI entries for error answers: always application/json, whatever the endpoint's own type."""
    desc = {400: "bad request", 401: "no valid token", 403: "the token's role may not do this",
            404: "no such resource (or not yours)", 409: "conflict",
            413: f"the submission is over {grading.size_limit_text()} (or the request body over twice that)",
            415: "unsupported content type", 422: "invalid input", 429: "rate limited (Retry-After)",
            503: "queue full or not ready (Retry-After)"}
    return {c: {"description": desc.get(c, "error"), "content": {"application/json": {"schema": ERROR_SCHEMA}}}
            for c in codes}


def visible_row(request: Request, who: Principal, sub_id: str) -> dict:
    row = request.app.state.store.get(sub_id) if len(sub_id) <= 64 else None
    if row is None or not can_see(who, row):
        raise ApiError(404, "not_found", f"no submission {sub_id!r}")
    return row


def exercise_or_422(name: str, field: str = "exercise") -> str:
    if name not in grading.exercise_names():
        raise ApiError(422, "unknown_exercise",
                       f"{field}: unknown exercise {name!r}{grading.did_you_mean(name, grading.exercise_names())}")
    return name


def track_or_422(track: str, allow_auto: bool = True, exercise: str | None = None) -> str:
    """A known track (or auto); given the exercise, one it offers."""
    try:
        track = grading.check_track(track, allow_auto=allow_auto)
        return grading.check_exercise_track(exercise, track) if exercise and track != "auto" else track
    except grading.UsageError as exc:
        raise ApiError(422, "unknown_track", f"track: {exc.message}") from None


def report_for(row: dict, audience: str) -> grading.Report:
    """The submission's stored report for ``audience`` (409 while it has none): a fresh object, the caller's own."""
    if row["status"] != "done" or not row["report_json"]:
        raise ApiError(409, "not_ready", f"submission {row['id']} has no report yet (status {row['status']})",
                       headers={"Retry-After": "2"})
    report = grading.load_report(row["report_json"])
    return report if audience == "interviewer" else grading.for_audience(report, audience)  # no copy of a copy


def parse_since(value) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        t = value
    else:
        try:
            t = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise ApiError(422, "invalid", f"since: not an ISO 8601 date or time: {value!r}") from None
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return t


def parse_cursor(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 18:
        raise ApiError(422, "invalid", "cursor: not a cursor this server returned")
    return int(value)
