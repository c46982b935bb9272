"""The tokens page (admins): interviewer and admin tokens — create (the secret is shown once), list, revoke
(the last admin token cannot be)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from harness.core.errors import UsageError
from harness.service.api.tokens import token_view
from harness.service.durations import parse_time
from harness.service.pages.rounds import signed_in_as
from harness.service.pages.views import _form_csrf_ok, _render
from harness.service.store import staff as staff_store
from harness.service.store.repository import now

router = APIRouter(include_in_schema=False)


def _page(request, who, *, error=None, created=None, status=200):
    rows = [token_view(t) for t in request.app.state.store.list_tokens() if t["role"] != "candidate"]
    return _render(request, "tokens.html", status, who=who, tokens=rows, error=error, created=created)


def _admin_or(request):
    return signed_in_as(request, ("admin",), "The tokens page")


@router.get("/tokens", response_class=HTMLResponse)
def tokens_page(request: Request):
    who, resp = _admin_or(request)
    return resp or _page(request, who)


@router.post("/tokens", response_class=HTMLResponse)
async def create_token_page(request: Request):
    who, resp = _admin_or(request)
    if resp:
        return resp
    form = await request.form()
    if not await _form_csrf_ok(request, form):
        return _page(request, who, error="The form expired; reload the page and try again.", status=403)
    role, name = str(form.get("role") or ""), str(form.get("name") or "").strip()[:200]
    if role not in ("admin", "interviewer") or not name:
        return _page(request, who, error="Choose a role (interviewer or admin) and a name.", status=422)
    try:
        expires = parse_time(str(form.get("expires")), "expires") if form.get("expires") else None
    except UsageError as exc:
        return _page(request, who, error=exc.message, status=422)
    if expires is not None and expires <= now():
        return _page(request, who, error="expires: must be in the future", status=422)
    secret, row = request.app.state.store.create_token(role=role, name=name, expires_at=expires)
    return _page(request, who, created={**token_view(row), "token": secret}, status=201)


@router.post("/tokens/{token_id}/revoke")
async def revoke_token_page(request: Request, token_id: int):
    who, resp = _admin_or(request)
    if resp:
        return resp
    if not await _form_csrf_ok(request, await request.form()):
        return _page(request, who, error="The form expired; reload the page and try again.", status=403)
    try:
        staff_store.revoke(request.app.state.store, token_id) if 0 < token_id < 2**31 else None
    except staff_store.LastAdmin as exc:
        return _page(request, who, error=str(exc), status=409)
    if token_id == who.token_id:
        return RedirectResponse("/login", status_code=303)
    return RedirectResponse("/tokens", status_code=303)
