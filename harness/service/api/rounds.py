"""/v1/rounds: hiring rounds (interviewers and admins create, list, close and invite); /v1/me: the caller and,
for a candidate, their rounds with the time left."""

from __future__ import annotations

import csv
import io

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from harness.core.errors import UsageError
from harness.service import grading, rounds
from harness.service.api.common import error_responses
from harness.service.auth import Principal, principal, staff
from harness.service.durations import parse_duration, parse_time
from harness.service.errors import ApiError
from harness.service.store import invitations, rounds as store_rounds
from harness.service.store.repository import iso, now

router = APIRouter(tags=["rounds"])
MAX_INVITES = 500
AFTER_CLOSE_DAYS = 14      # an invited candidate's token outlives the round by this, to read after_close feedback
TEXT = r"^[^\x00-\x1f\x7f]*$"          # one line of printable text (no NUL, no control characters)


class RoundCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=TEXT)
    exercises: list[str] = Field(min_length=1, max_length=20, description="exercise names, or name:track to "
                                                                          "allow one track only (mha:numpy)")
    opens_at: str = Field("now", max_length=40, description="ISO 8601, `now`, or a duration from now (2h)")
    closes_at: str = Field(max_length=40, description="ISO 8601 or a duration from the opening (2h, 3d)")
    time_limit: str | None = Field(None, max_length=20, description="per candidate, from their first open (45m)")
    max_attempts: int | None = Field(None, ge=1, le=1000, description="per exercise")
    feedback: str = Field("full", pattern="^(full|summary|after_close)$")
    feedback_after: str | None = Field(None, pattern="^(full|summary)$",
                                       description="after_close: what candidates read once the round closes")


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")
    display_name: str | None = Field(None, min_length=1, max_length=200, pattern=TEXT)
    email: str | None = Field(None, max_length=320, pattern=TEXT)
    external_ref: str | None = Field(None, max_length=200, pattern=TEXT)
    candidate_id: str | None = Field(None, max_length=32, description="re-invite an existing candidate")


class InviteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidates: list[Person] = Field(min_length=1, max_length=MAX_INVITES)
    expires: str | None = Field(None, max_length=40, description="the links' lifetime (48h) or an ISO time; "
                                                                 "default: when the round closes")


def _inline(schema: dict) -> dict:
    """A JSON schema with its local ``$defs`` references replaced by the definitions (for openapi_extra)."""
    defs = schema.pop("$defs", {})

    def walk(x):
        if isinstance(x, dict):
            if set(x) == {"$ref"} and x["$ref"].startswith("#/$defs/"):
                return walk(defs[x["$ref"].rsplit("/", 1)[1]])
            return {k: walk(v) for k, v in x.items()}
        return [walk(v) for v in x] if isinstance(x, list) else x
    return walk(schema)


def _usage(exc: UsageError) -> ApiError:
    return ApiError(422, "invalid", exc.message)


def parse_exercises(items: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        name, _, track = item.partition(":")
        if name not in grading.exercise_names():
            raise UsageError(f"exercises: unknown exercise {name!r}"
                             f"{grading.did_you_mean(name, grading.exercise_names())}")
        offered = list(grading.get_exercise(name).tracks)
        if track and track not in offered:
            raise UsageError(f"exercises: {name} has no track {track!r} ({' or '.join(offered)})")
        out.setdefault(name, [])
        for t in ([track] if track else offered):
            if t not in out[name]:
                out[name].append(t)
    return out


def new_round(store, body: RoundCreate, created_by: int | None) -> dict:
    """Check and store a round (UsageError on bad input): shared by the API, the page and the CLI."""
    exercises = parse_exercises(body.exercises)
    opens = parse_time(body.opens_at, "opens_at")
    closes = parse_time(body.closes_at, "closes_at", base=opens)
    if closes <= opens:
        raise UsageError("closes_at: must be after opens_at")
    limit = int(parse_duration(body.time_limit, "time_limit").total_seconds()) if body.time_limit else None
    return store_rounds.create(store, name=body.name, exercises=exercises, opens_at=opens, closes_at=closes,
                               time_limit_s=limit, max_attempts=body.max_attempts, feedback=body.feedback,
                               feedback_after=body.feedback_after or "full", created_by=created_by)


def round_view(r: dict) -> dict:
    return {"id": r["id"], "name": r["name"], "exercises": r["exercises"], "state": rounds.state(r),
            "opens_at": iso(r["opens_at"]), "closes_at": iso(r["ends_at"]), "time_limit_s": r["time_limit_s"],
            "max_attempts": r["max_attempts"], "feedback": r["feedback"], "feedback_after": r["feedback_after"],
            "created_at": iso(r["created_at"]), "closed_at": iso(r["closed_at"]),
            "candidates": r.get("candidates")}


def invitation_view(inv: dict, link: str | None = None) -> dict:
    c = inv.get("candidate") or {}
    return {"id": inv["id"], "round_id": inv["round_id"], "candidate_id": inv["candidate_id"],
            "display_name": c.get("display_name"), "email": c.get("email"), "external_ref": c.get("external_ref"),
            "state": inv.get("state") or invitations.state(inv), "created_at": iso(inv["created_at"]),
            "expires_at": iso(inv["expires_at"]), "used_at": iso(inv["used_at"]), "link": link}


def link_for(request: Request, secret: str) -> str:
    return join_link(request.app.state.settings.public_url or str(request.base_url), secret)


def join_link(base_url: str, secret: str) -> str:
    return base_url.rstrip("/") + "/join?code=" + secret


def links_csv(views: list[dict]) -> Response:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(("display_name", "email", "external_ref", "candidate_id", "invitation", "link", "expires_at"))
    for v in views:
        w.writerow(["'" + x if x and x[:1] in "=+-@\t\r" else x for x in (
            v["display_name"], v["email"], v["external_ref"], v["candidate_id"], str(v["id"]), v["link"],
            v["expires_at"])])
    return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="invitations.csv"',
                             "Cache-Control": "no-store"})


def people_from_csv(text: str) -> list[dict]:
    """Rows of a CSV with a header naming `name` (or `display_name`), optionally `email` and `external_ref`."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    fields = {(f or "").strip().lower(): f for f in reader.fieldnames or []}
    key = fields.get("display_name") or fields.get("name")
    if key is None:
        raise UsageError("the CSV needs a header row with a `name` column (and optionally `email`, "
                         "`external_ref`)")
    out = []
    for i, row in enumerate(reader, start=2):
        name = (row.get(key) or "").strip()
        if not name:
            continue
        if len(name) > 200:
            raise UsageError(f"CSV line {i}: the name is over 200 characters")
        out.append({"display_name": name, "email": (row.get(fields.get("email", ""), "") or "").strip() or None,
                    "external_ref": (row.get(fields.get("external_ref", ""), "") or "").strip() or None})
    if not out:
        raise UsageError("the CSV names nobody")
    check_people(out)
    if len(out) > MAX_INVITES:
        raise UsageError(f"at most {MAX_INVITES} invitations at once")
    return out


def check_people(people: list[dict]) -> None:
    """Names, e-mails and references are one line of printable text each, of bounded length."""
    import re

    for p in people:
        for key, limit in (("display_name", 200), ("email", 320), ("external_ref", 200)):
            v = p.get(key)
            if v is not None and (len(v) > limit or not re.match(TEXT, v)):
                raise UsageError(f"{key}: at most {limit} printable characters on one line ({v[:40]!r})")


def invite(request: Request, who: Principal, r: dict, people: list[dict], expires: str | None) -> list[dict]:
    """Invitations (and new candidates) for ``people``; the views carry the links, shown this once."""
    return invite_people(request.app.state.store, r, people, expires, created_by=who.token_id,
                         base_url=request.app.state.settings.public_url or str(request.base_url))


def invite_people(store, r: dict, people: list[dict], expires: str | None, *, created_by: int | None,
                  base_url: str) -> list[dict]:
    """The API's, the page's and the CLI's invitations (UsageError on bad input)."""
    if rounds.state(r) == "closed":
        raise UsageError(f"round {r['name']!r} is closed")
    for p in people:
        if not p.get("candidate_id") and not p.get("display_name"):
            raise UsageError("candidates: each needs a display_name (or the candidate_id of an earlier one)")
    until = parse_time(expires, "expires") if expires else r["ends_at"]
    if until <= now():
        raise UsageError("expires: must be in the future")
    try:
        made = invitations.invite(store, r["id"], people, expires_at=until, created_by=created_by)
    except KeyError as exc:
        raise UsageError(f"candidates: no candidate {exc.args[0]!r}") from None
    return [invitation_view({**inv, "candidate": c}, join_link(base_url, secret)) for secret, inv, c in made]


def round_or_404(request: Request, round_id: str) -> dict:
    r = store_rounds.get(request.app.state.store, round_id)
    if r is None:
        raise ApiError(404, "not_found", f"no round {round_id!r}")
    return r


@router.post("/v1/rounds", status_code=201, responses=error_responses(401, 403, 422))
def create_round(body: RoundCreate, request: Request, who: Principal = Depends(staff)):
    """A round: exercises (and tracks), a window, an optional per-candidate time limit and attempt limit, and
    the feedback policy (full | summary | after_close)."""
    try:
        r = new_round(request.app.state.store, body, who.token_id)
    except UsageError as exc:
        raise _usage(exc) from None
    return JSONResponse(round_view(r), status_code=201, headers={"Location": f"/v1/rounds/{r['id']}"})


@router.get("/v1/rounds", responses=error_responses(401, 403))
def list_rounds(request: Request, who: Principal = Depends(staff)):
    return [round_view(r) for r in store_rounds.list_all(request.app.state.store)]


@router.get("/v1/rounds/{round_id}", responses=error_responses(401, 403, 404))
def get_round(round_id: str, request: Request, who: Principal = Depends(staff)):
    r = round_or_404(request, round_id)
    members = store_rounds.members(request.app.state.store, round_id)
    return {**round_view(r), "candidates": [
        {"id": m["id"], "display_name": m["display_name"], "email": m["email"], "external_ref": m["external_ref"],
         "invited_at": iso(m["invited_at"]), "started_at": iso(m["started_at"])} for m in members]}


@router.post("/v1/rounds/{round_id}/close", responses=error_responses(401, 403, 404))
def close_round(round_id: str, request: Request, who: Principal = Depends(staff)):
    """Close now: every later submission is refused (`round_closed`); `after_close` feedback is released."""
    round_or_404(request, round_id)
    return round_view(store_rounds.close(request.app.state.store, round_id))


@router.post("/v1/rounds/{round_id}/invitations", status_code=201, responses={
    201: {"description": "the invitations, each with its link (shown this once); text/csv with ?format=csv"},
    **error_responses(401, 403, 404, 415, 422)}, openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": _inline(InviteBody.model_json_schema())},
        "text/csv": {"schema": {"type": "string", "description": "header row: name,email,external_ref"}}}}})
async def create_invitations(round_id: str, request: Request, format: str = Query("json", pattern="^(json|csv)$"),
                             expires: str | None = Query(None, max_length=40),
                             who: Principal = Depends(staff)):
    """Invite candidates: one single-use sign-in link each (a new candidate record per person, or an existing
    `candidate_id`). JSON, or a CSV of names and e-mails (bulk). The service sends no mail: it returns the links
    (`?format=csv` for a file)."""
    from starlette.concurrency import run_in_threadpool

    r = round_or_404(request, round_id)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if ctype == "text/csv":
            people = people_from_csv((await request.body()).decode("utf-8", "replace"))
        elif ctype == "application/json":
            try:
                body = InviteBody.model_validate_json(await request.body())
            except ValueError as exc:
                first = getattr(exc, "errors", lambda: [{"loc": (), "msg": str(exc)}])()[0]
                raise ApiError(422, "invalid", f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
            people, expires = [p.model_dump() for p in body.candidates], body.expires or expires
        else:
            raise ApiError(415, "unsupported_media_type", "send application/json or text/csv")
        views = await run_in_threadpool(invite, request, who, r, people, expires)
    except UsageError as exc:
        raise _usage(exc) from None
    if format == "csv":
        return links_csv(views)
    return JSONResponse({"invitations": views}, status_code=201, headers={"Cache-Control": "no-store"})


@router.get("/v1/rounds/{round_id}/invitations", responses=error_responses(401, 403, 404))
def list_invitations(round_id: str, request: Request, who: Principal = Depends(staff)):
    """Every invitation of the round and its state (pending | used | revoked | expired); never a link."""
    round_or_404(request, round_id)
    return [invitation_view(i) for i in invitations.for_round(request.app.state.store, round_id)]


@router.post("/v1/invitations/{inv_id}/resend", status_code=201, responses=error_responses(401, 403, 404, 422))
def resend_invitation(inv_id: int, request: Request, who: Principal = Depends(staff)):
    """A new link for the same candidate; the old one stops working if it was unused."""
    store = request.app.state.store
    old = invitations.get(store, inv_id) if 0 < inv_id < 2**31 else None
    if old is None:
        raise ApiError(404, "not_found", f"no invitation {inv_id}")
    r = round_or_404(request, old["round_id"])
    if rounds.state(r) == "closed":
        raise ApiError(422, "invalid", f"round {r['name']!r} is closed")
    secret, inv = invitations.resend(store, inv_id, expires_at=max(r["ends_at"], now()), created_by=who.token_id)
    from harness.service.store import candidates

    return JSONResponse(invitation_view({**inv, "candidate": candidates.get(store, inv["candidate_id"])},
                                        link_for(request, secret)), status_code=201,
                        headers={"Cache-Control": "no-store"})


@router.delete("/v1/invitations/{inv_id}", status_code=204, responses=error_responses(401, 403, 404))
def revoke_invitation(inv_id: int, request: Request, who: Principal = Depends(staff)):
    """The link stops working (a link already used cannot be revoked: revoke the candidate's session token)."""
    if not (0 < inv_id < 2**31) or not invitations.revoke(request.app.state.store, inv_id):
        raise ApiError(404, "not_found", f"no unused invitation {inv_id}")
    return Response(status_code=204)


class JoinBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(min_length=1, max_length=100, description="the invitation link's `code`")


def redeem(store, code: str) -> tuple[str, dict, dict] | None:
    """Use an invitation: (a new candidate token's secret, its row, the round), or None if the code is unknown,
    used, revoked or expired. The token lives until 14 days after the round closes (to read after_close
    feedback)."""
    import datetime as dt

    from harness.service.store import candidates

    inv = invitations.redeem(store, code)
    if inv is None:
        return None
    r = store_rounds.get(store, inv["round_id"])
    c = candidates.get(store, inv["candidate_id"])
    until = max(r["ends_at"], now()) + dt.timedelta(days=AFTER_CLOSE_DAYS)
    secret, tok = store.create_token(role="candidate", name=c["display_name"], candidate=c["display_name"],
                                     candidate_id=c["id"], expires_at=until)
    return secret, tok, r


@router.post("/v1/join", status_code=201, responses=error_responses(404, 422))
def join(body: JoinBody, request: Request):
    """Exchange an invitation code for a candidate bearer token (for a command-line client; the browser uses
    the link's page). Single use: the same code then opens nothing, on the page or here."""
    got = redeem(request.app.state.store, body.code)
    if got is None:
        raise ApiError(404, "not_found", "this invitation is unknown, used, revoked or expired")
    secret, tok, r = got
    return JSONResponse({"token": secret, "candidate_id": tok["candidate_id"], "round_id": r["id"],
                         "expires_at": iso(tok["expires_at"])}, status_code=201, headers={"Cache-Control": "no-store"})


@router.get("/v1/me", responses=error_responses(401))
def me(request: Request, who: Principal = Depends(principal)):
    """Who the caller is; for a candidate, their rounds (state, deadline, seconds left, attempts used).
    Opening this starts the time limit of an open round, as opening the page does."""
    out = {"role": who.role, "name": who.name, "candidate_id": who.candidate_id}
    if who.role == "candidate":
        out["rounds"] = rounds.open_rounds(request.app.state.store, who)
    return out
