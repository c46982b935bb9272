"""The rounds pages: interviewers create a round, invite candidates (one by one or a CSV), see the links once,
resend, revoke and close; candidates open their invitation link (/join) and land on their round's exercises."""

from __future__ import annotations

import csv
import io
import secrets

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from harness.core.errors import UsageError
from harness.service import grading, rounds
from harness.service.api import rounds as api
from harness.service.pages.views import _form_csrf_ok, _render, _signin, _who, start_session
from harness.service.store import invitations, rounds as store_rounds
from harness.service.store.repository import iso, now

router = APIRouter(include_in_schema=False)
JOIN_CSRF = "grader_join_csrf"


def signed_in_as(request: Request, roles: tuple[str, ...], what: str):
    """(who, None) when the session's role is one of ``roles``; (who, the sign-in redirect or a 403 page)."""
    who = _who(request)
    if who is None:
        return None, _signin(request)
    if who.role not in roles:
        return who, _render(request, "message.html", 403, who=who, title="Not allowed",
                            message=f"{what} needs a token with role {' or '.join(roles)}.")
    return who, None


def _staff_or(request: Request):
    return signed_in_as(request, ("admin", "interviewer"), "Running rounds")


def _rounds_page(request, who, *, error=None, status=200, form=None):
    rows = [api.round_view(r) for r in store_rounds.list_all(request.app.state.store)]
    return _render(request, "rounds.html", status, who=who, rounds=rows, error=error, form=form or {},
                   exercises=grading.exercise_names())


@router.get("/rounds", response_class=HTMLResponse)
def rounds_page(request: Request):
    who, resp = _staff_or(request)
    return resp or _rounds_page(request, who)


@router.post("/rounds", response_class=HTMLResponse)
async def create_round_page(request: Request):
    who, resp = _staff_or(request)
    if resp:
        return resp
    form = await request.form()
    if not await _form_csrf_ok(request, form):
        return _rounds_page(request, who, error="The form expired; reload the page and try again.", status=403)
    fields = {k: str(form.get(k) or "").strip() for k in ("name", "opens_at", "closes_at", "time_limit",
                                                           "max_attempts", "feedback", "feedback_after")}
    try:
        body = api.RoundCreate(name=fields["name"], exercises=[str(x) for x in form.getlist("exercises")],
                               opens_at=fields["opens_at"] or "now", closes_at=fields["closes_at"],
                               time_limit=fields["time_limit"] or None,
                               max_attempts=int(fields["max_attempts"]) if fields["max_attempts"] else None,
                               feedback=fields["feedback"] or "full", feedback_after=fields["feedback_after"] or None)
        r = await run_in_threadpool(api.new_round, request.app.state.store, body, who.token_id)
    except ValidationError as exc:
        e = exc.errors()[0]
        return _rounds_page(request, who, error=f"{'.'.join(map(str, e['loc']))}: {e['msg']}", status=422,
                            form=fields)
    except (UsageError, ValueError) as exc:
        return _rounds_page(request, who, error=getattr(exc, "message", None) or str(exc), status=422, form=fields)
    return RedirectResponse(f"/rounds/{r['id']}", status_code=303)


def _round_page(request, who, round_id, *, error=None, status=200, links=None):
    store = request.app.state.store
    r = store_rounds.get(store, round_id)
    if r is None:
        return _render(request, "message.html", 404, who=who, title="Not found", message="No such round.")
    return _render(request, "round.html", status, who=who, r=api.round_view(r), error=error, links=links or [],
                   invitations=[api.invitation_view(i) for i in invitations.for_round(store, round_id)],
                   members=store_rounds.members(store, round_id), iso=iso)


@router.get("/rounds/{round_id}", response_class=HTMLResponse)
def round_page(request: Request, round_id: str):
    who, resp = _staff_or(request)
    return resp or _round_page(request, who, round_id)


def _people_from_lines(text: str) -> list[dict]:
    out = []
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row] + ["", ""]
        if cells[0]:
            out.append({"display_name": cells[0][:200], "email": cells[1][:320] or None,
                        "external_ref": cells[2][:200] or None})
    return out


@router.post("/rounds/{round_id}/invite")
async def invite_page(request: Request, round_id: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    form = await request.form(max_files=1)
    if not await _form_csrf_ok(request, form):
        return _round_page(request, who, round_id, error="The form expired; reload the page and try again.",
                           status=403)
    r = store_rounds.get(request.app.state.store, round_id)
    if r is None:
        return _round_page(request, who, round_id)
    try:
        upload = form.get("csv")
        if upload is not None and not isinstance(upload, str) and upload.filename:
            people = api.people_from_csv((await upload.read()).decode("utf-8", "replace"))
        else:
            people = _people_from_lines(str(form.get("people") or ""))
        api.check_people(people)
        if not people:
            raise UsageError("Name at least one candidate (one per line: name, e-mail, reference), or choose a CSV.")
        views = await run_in_threadpool(api.invite, request, who, r, people, str(form.get("expires") or "") or None)
    except UsageError as exc:
        return _round_page(request, who, round_id, error=exc.message, status=422)
    if form.get("download"):
        return api.links_csv(views)
    return _round_page(request, who, round_id, links=views, status=201)


@router.post("/rounds/{round_id}/close")
async def close_page(request: Request, round_id: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    if not await _form_csrf_ok(request, await request.form()):
        return _round_page(request, who, round_id, error="The form expired; reload the page.", status=403)
    store_rounds.close(request.app.state.store, round_id)
    return RedirectResponse(f"/rounds/{round_id}", status_code=303)


@router.post("/invitations/{inv_id}/{action}")
async def invitation_action(request: Request, inv_id: int, action: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    store = request.app.state.store
    inv = invitations.get(store, inv_id) if 0 < inv_id < 2**31 else None
    if inv is None or action not in ("resend", "revoke"):
        return _render(request, "message.html", 404, who=who, title="Not found", message="No such invitation.")
    if not await _form_csrf_ok(request, await request.form()):
        return _round_page(request, who, inv["round_id"], error="The form expired; reload the page.", status=403)
    if action == "revoke":
        invitations.revoke(store, inv_id)
        return RedirectResponse(f"/rounds/{inv['round_id']}", status_code=303)
    r = store_rounds.get(store, inv["round_id"])
    if rounds.state(r) == "closed":
        return _round_page(request, who, r["id"], error="The round is closed.", status=422)
    secret, new = invitations.resend(store, inv_id, expires_at=max(r["ends_at"], now()), created_by=who.token_id)
    view = api.invitation_view({**new, "candidate": next(
        (m for m in store_rounds.members(store, r["id"]) if m["id"] == new["candidate_id"]), {})},
        api.link_for(request, secret))
    return _round_page(request, who, r["id"], links=[view], status=201)


# -- the candidate's side: the invitation link -------------------------------------------------------------
def _join_page(request, code: str, status: int = 200, error: str | None = None):
    inv = invitations.peek(request.app.state.store, code) if code else None
    r = store_rounds.get(request.app.state.store, inv["round_id"]) if inv else None
    nonce = secrets.token_urlsafe(24)
    resp = _render(request, "join.html", status if inv else 404, who=None, csrf=nonce, code=code if inv else "",
                   round=r, error=error if inv else "This invitation link is unknown, used, revoked or expired. "
                                                    "Ask your interviewer for a new one.")
    resp.set_cookie(JOIN_CSRF, nonce, httponly=True, samesite="strict", path="/join",
                    secure=request.app.state.settings.secure_cookies)
    return resp


@router.get("/join", response_class=HTMLResponse)
def join_page(request: Request, code: str = ""):
    """The link shows a page with a button: opening it (a mail scanner, a link preview) uses nothing."""
    return _join_page(request, code[:100])


@router.post("/join", response_class=HTMLResponse)
async def join(request: Request):
    form = await request.form()
    code = str(form.get("code") or "")[:100]
    sent, cookie = str(form.get("csrf") or ""), request.cookies.get(JOIN_CSRF) or ""
    if not sent or not cookie or not secrets.compare_digest(sent, cookie):
        return _join_page(request, code, 403, "The page expired; press the button again.")
    got = await run_in_threadpool(api.redeem, request.app.state.store, code)
    if got is None:
        return _join_page(request, code)
    _, tok, _ = got
    resp = RedirectResponse("/exercises", status_code=303)
    await run_in_threadpool(start_session, request, resp, tok["id"], (tok["expires_at"] - now()).total_seconds())
    resp.delete_cookie(JOIN_CSRF, path="/join")
    return resp
