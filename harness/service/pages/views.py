"""The web pages: sign in with a token, candidates pick an exercise, download the stub, upload a file, watch
the status and read their report; interviewers filter the list, open reports, compare, regrade and export.

Server-rendered (Jinja2, autoescaped: candidate text is always escaped), one script of our own allowed by its
hash (local times on hover; the status page refreshes with <meta http-equiv=refresh>), every page under a
restrictive Content-Security-Policy. The session
is the token in an HttpOnly, SameSite=Strict cookie; every form that changes something carries a CSRF token
(an HMAC of the session with a server secret; the sign-in form a double-submit cookie)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from harness.service import grading, rounds, views
from harness.service.auth import COOKIE, Principal, check_csrf, csrf_token, lookup, session_principal
from harness.service.errors import ApiError
from harness.service.app import CSP, TOO_LARGE_KEY   # the scope key app.BodyLimit sets for a refused upload
from harness.service.pages import markdown, timestamps
from harness.service.store import sessions

router = APIRouter(include_in_schema=False)
TEMPLATES = Environment(loader=FileSystemLoader(str(Path(__file__).resolve().parent / "templates")),
                        autoescape=select_autoescape(default=True, default_for_string=True))
LOGIN_CSRF = "grader_login_csrf"


TEMPLATES.filters["when"] = timestamps.when
TEMPLATES.globals["time_js"] = timestamps.SCRIPT
PAGE_CSP = f"{CSP}; script-src {timestamps.script_hash()}"   # the one script: local times on hover


def _render(request: Request, name: str, status: int = 200, **ctx) -> HTMLResponse:
    who = ctx.get("who")
    token = request.cookies.get(COOKIE)
    ctx.setdefault("csrf", csrf_token(request.app.state.secret, token) if (who and token) else "")
    ctx.setdefault("size_limit", grading.size_limit_text())
    return HTMLResponse(TEMPLATES.get_template(name).render(**ctx), status_code=status,
                        headers={"Cache-Control": "no-store", "Content-Security-Policy": PAGE_CSP})


def _who(request: Request) -> Principal | None:
    return session_principal(request)


def _signin(request: Request):
    return RedirectResponse("/login?" + urlencode({"next": request.url.path}), status_code=303)


def _forbidden(request: Request, who: Principal, what: str) -> HTMLResponse:
    return _render(request, "message.html", 403, who=who, title="Not allowed",
                   message=f"{what} needs an interviewer or admin token.")


async def _form_csrf_ok(request: Request, form) -> bool:
    token = request.cookies.get(COOKIE) or ""
    return check_csrf(request.app.state.secret, token, form.get("csrf"))


@router.get("/", response_class=HTMLResponse)
def home(request: Request):
    who = _who(request)
    if who is None:
        return RedirectResponse("/login", status_code=303)
    return RedirectResponse("/submissions" if who.is_staff else "/exercises", status_code=303)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/"):
    nonce = secrets.token_urlsafe(24)
    resp = _render(request, "login.html", who=None, csrf=nonce, next=_safe_next(next), error=None)
    resp.set_cookie(LOGIN_CSRF, nonce, httponly=True, samesite="strict", path="/login",
                    secure=request.app.state.settings.secure_cookies)
    return resp


def _safe_next(value: str | None) -> str:
    return value if value and value.startswith("/") and not value.startswith("//") and "\\" not in value else "/"


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request):
    form = await request.form()
    sent, cookie = form.get("csrf") or "", request.cookies.get(LOGIN_CSRF) or ""
    if not sent or not cookie or not secrets.compare_digest(str(sent), cookie):
        return _render(request, "login.html", 403, who=None, csrf="", next="/",
                       error="The sign-in form expired; reload the page and try again.")
    token = str(form.get("token") or "").strip()
    who = await run_in_threadpool(lookup, request, token) if token else None
    if who is None:
        nonce = secrets.token_urlsafe(24)
        resp = _render(request, "login.html", 401, who=None, csrf=nonce, next=_safe_next(form.get("next")),
                       error="That token is unknown, revoked or expired.")
        resp.set_cookie(LOGIN_CSRF, nonce, httponly=True, samesite="strict", path="/login",
                        secure=request.app.state.settings.secure_cookies)
        return resp
    resp = RedirectResponse(_safe_next(str(form.get("next") or "/")), status_code=303)
    await run_in_threadpool(start_session, request, resp, who.token_id)
    resp.delete_cookie(LOGIN_CSRF, path="/login")
    return resp


def start_session(request: Request, resp, token_id: int, ttl_s: float = sessions.TTL_S) -> None:
    """A new server-side session for this token; the cookie carries only its random id."""
    sid = sessions.open_session(request.app.state.store, token_id, ttl_s)
    resp.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/",
                    secure=request.app.state.settings.secure_cookies, max_age=int(ttl_s))


@router.post("/logout")
async def logout(request: Request):
    form = await request.form()
    if not await _form_csrf_ok(request, form):
        return HTMLResponse("forbidden", status_code=403)
    await run_in_threadpool(sessions.end, request.app.state.store, request.cookies.get(COOKIE) or "")
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(COOKIE, path="/")
    return resp


@router.get("/exercises", response_class=HTMLResponse)
def exercises_page(request: Request, exercise: str = Query("", max_length=64)):
    who = _who(request)
    if who is None:
        return _signin(request)
    return _exercises(request, who, chosen={"exercise": exercise})


@router.get("/exercises/{name}", response_class=HTMLResponse)
def exercise_page(request: Request, name: str):
    who = _who(request)
    if who is None:
        return _signin(request)
    if name not in rounds.visible_exercises(request.app.state.store, who):
        return _render(request, "message.html", 404, who=who, title="Not found",
                       message=f"No exercise {name!r}{grading.did_you_mean(name, grading.exercise_names())}")
    ex = grading.exercise_detail(name, staff=who.is_staff)
    notes = ex.get("interviewer_notes")
    return _render(request, "exercise.html", who=who, ex=ex, prompt_html=markdown.to_html(ex["prompt"], shift=1),
                   notes_html=markdown.to_html(notes, shift=1) if notes else None)


def _exercises(request: Request, who: Principal, *, error: str | None = None, status: int = 200,
               chosen: dict | None = None, headers: dict | None = None):
    """The exercises with the upload form; ``chosen`` (exercise, track, candidate) is what the form shows
    selected: what was sent when a submission is refused, else the first exercise of the page."""
    store = request.app.state.store
    names = list(rounds.visible_exercises(store, who))
    exercises = [grading.exercise_summary(n) for n in names]
    chosen = dict(chosen or {})
    if chosen.get("exercise") not in names:
        chosen["exercise"] = names[0] if names else ""
    if chosen.get("track") not in ("auto", *grading.TRACKS):
        chosen["track"] = "auto"
    mine = store.list_submissions(candidate_id=who.candidate_id or "", limit=20) if not who.is_staff else []
    my_rounds = rounds.open_rounds(store, who)
    # a candidate in rounds may submit only while one of them is open and its time limit has not run out: the
    # form is not offered otherwise (the API would refuse it with round_closed / round_not_open / time_limit)
    can_submit = who.is_staff or not my_rounds or any(r["state"] == "open" and r["seconds_left"] > 0
                                                      for r in my_rounds)
    resp = _render(request, "exercises.html", status, who=who, exercises=exercises, error=error, chosen=chosen,
                   mine=[views.submission_view(rounds.row_for(store, who, r), who.audience) for r in mine],
                   my_rounds=my_rounds, can_submit=can_submit, tracks=grading.TRACKS,
                   track_labels={"numpy": "NumPy", "torch": "PyTorch", "python": "Python"})
    resp.headers.update(headers or {})
    return resp


@router.post("/submit", response_class=HTMLResponse)
async def submit_page(request: Request):
    from harness.service.api.submissions import _intake

    who = _who(request)
    if who is None:
        return _signin(request)
    refused = request.scope.get(TOO_LARGE_KEY)
    if refused is not None:   # BodyLimit refused the body: the page, not the API's JSON, with the choice kept
        return _exercises(request, who, error=f"The file is too large: a submission may be at most "
                                              f"{grading.size_limit_text()}.", status=413,
                          chosen=_fields_before_file(request, refused["head"]), headers={"Connection": "close"})
    try:
        form = await request.form(max_files=1, max_fields=10)
    except Exception:
        return _exercises(request, who, error="The upload could not be read.", status=422)
    fields = {"exercise": str(form.get("exercise") or "")[:64], "track": str(form.get("track") or "auto")[:16],
              "candidate": (str(form.get("candidate")) or None) if who.is_staff and form.get("candidate") else None}
    if not await _form_csrf_ok(request, form):
        return _exercises(request, who, error="The form expired; reload the page and try again.", status=403,
                          chosen=fields)
    upload = form.get("file")
    if upload is None or isinstance(upload, str) or not upload.filename:
        return _exercises(request, who, error="Choose a .py file to upload.", status=422, chosen=fields)
    data = await upload.read()
    try:
        row, created = await run_in_threadpool(_intake, request, who, fields, data, upload.filename, None)
    except ApiError as exc:
        return _exercises(request, who, error=exc.message, status=exc.status, chosen=fields)
    request.app.state.metrics.inc("grader_submissions_total", exercise=row["exercise"])
    await run_in_threadpool(request.app.state.pool.enqueue, row["id"], row["queue"])
    return RedirectResponse(f"/submissions/{row['id']}", status_code=303)


def _fields_before_file(request: Request, head: bytes) -> dict:
    """The short text fields (exercise, track, candidate) of a multipart form from the start of its body: a
    browser sends them before the file, in the form's order. Only used to redisplay the form."""
    ctype = request.headers.get("content-type", "")
    boundary = ctype.split("boundary=", 1)[1].split(";")[0].strip('"') if "boundary=" in ctype else ""
    fields = {}
    if not boundary:
        return fields
    for part in head.split(b"--" + boundary.encode("latin-1", "replace"))[1:]:
        meta, sep, value = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="(exercise|track|candidate)"', meta)
        if sep and name and b"filename=" not in meta:
            fields[name.group(1).decode()] = value.removesuffix(b"\r\n")[:200].decode("utf-8", "replace")
    return fields


@router.get("/submissions/{sub_id}", response_class=HTMLResponse)
def submission_page(request: Request, sub_id: str):
    who = _who(request)
    if who is None:
        return _signin(request)
    row = request.app.state.store.get(sub_id) if len(sub_id) <= 64 else None
    from harness.service.auth import can_see

    if row is None or not can_see(who, row):
        return _render(request, "message.html", 404, who=who, title="Not found", message="No such submission.")
    store = request.app.state.store
    sub = views.submission_view(rounds.row_for(store, who, row), who.audience)
    report, cats, failing = None, [], []
    if row["status"] == "done" and row["report_json"] and rounds.policy(store, who, row) != "received":
        report = rounds.report_for(store, who, row, grading.load_report(row["report_json"]))
        cats = grading.category_scores(report)
        failing = grading.failure_groups(report.tests)
    return _render(request, "submission.html", who=who, sub=sub, report=report, cats=cats, failing=failing,
                   refresh=row["status"] in ("queued", "running"))


@router.get("/submissions", response_class=HTMLResponse)
def list_page(request: Request, exercise: str = Query("", max_length=64), candidate: str = Query("", max_length=200),
              verdict: str = Query("", max_length=16), cursor: str = Query("", max_length=20),
              round: str = Query("", max_length=32)):
    who = _who(request)
    if who is None:
        return _signin(request)
    if not who.is_staff:
        return RedirectResponse("/exercises", status_code=303)
    cur = int(cursor) if cursor.isdigit() and len(cursor) < 18 else None
    rows = request.app.state.store.list_submissions(exercise=exercise or None, candidate=candidate or None,
                                                    verdict=verdict if verdict in ("passed", "failed", "error")
                                                    else None, limit=51, cursor=cur, round_id=round or None)
    more = len(rows) > 50
    rows = rows[:50]
    query = {k: v for k, v in (("exercise", exercise), ("candidate", candidate), ("verdict", verdict),
                               ("round", round)) if v}
    return _render(request, "list.html", who=who, subs=[views.submission_view(r, who.audience) for r in rows],
                   filters=query, exercises=grading.exercise_names(),
                   export_query=urlencode(query), next_cursor=str(rows[-1]["seq"]) if more else None,
                   next_query=urlencode({**query, "cursor": str(rows[-1]["seq"])}) if more else "")


@router.get("/workers", response_class=HTMLResponse)
def workers_page(request: Request):
    who = _who(request)
    if who is None:
        return _signin(request)
    if not who.is_staff:
        return _forbidden(request, who, "The workers page")
    s = request.app.state.settings
    rows = [views.worker_view(w, s.heartbeat_s) for w in request.app.state.store.list_workers()]
    return _render(request, "workers.html", who=who, workers=rows, stale_s=3 * s.heartbeat_s + 5,
                   mode=request.app.state.pool.stats().get("mode", "embedded"),
                   depths=request.app.state.store.queue_depths())


@router.post("/submissions/{sub_id}/regrade")
async def regrade_page(request: Request, sub_id: str):
    who = _who(request)
    if who is None:
        return _signin(request)
    form = await request.form()
    if not await _form_csrf_ok(request, form):
        return _render(request, "message.html", 403, who=who, title="Form expired",
                       message="The form expired; reload the page and try again.")
    if not who.is_staff:
        return _forbidden(request, who, "Regrading")
    row = request.app.state.store.get(sub_id) if len(sub_id) <= 64 else None
    if row is None:
        return _render(request, "message.html", 404, who=who, title="Not found", message="No such submission.")
    if row["status"] != "running":
        from harness.service.store import review

        review.keep_version(request.app.state.store, sub_id, by=f"{who.name} ({who.id})",
                            reason=str(form.get("reason") or "").strip()[:500] or None)
        seed = str(form.get("seed") or "").strip()
        request.app.state.store.regrade(sub_id, seed=int(seed) if seed.isdigit() and int(seed) < 2**32 else None)
        request.app.state.pool.enqueue(sub_id, "bulk")
    return RedirectResponse(f"/submissions/{sub_id}", status_code=303)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, ids: list[str] = Query(default=[], max_length=100), detailed: bool = False):
    who = _who(request)
    if who is None:
        return _signin(request)
    if not who.is_staff:
        return _forbidden(request, who, "Comparing candidates")
    rows = request.app.state.store.list_submissions(ids=[i for i in ids if len(i) <= 64][:50], limit=50)
    done = [(f"{r['candidate'] or 'anonymous'} · {r['filename']} · {r['id'][:8]}",
             grading.load_report(r["report_json"])) for r in rows if r["status"] == "done" and r["report_json"]]
    if not done:
        return _render(request, "message.html", 422, who=who, title="Nothing to compare",
                       message="Select graded submissions in the list, then press Compare.")
    if not detailed:
        from harness.service import review

        return _render(request, "compare.html", who=who, rows=review.compare_rows(
            request.app.state.store, [r for r in rows if r["status"] == "done" and r["report_json"]]),
            query=urlencode([("ids", r["id"]) for r in rows] + [("detailed", "1")]))
    page = grading.compare_html(done).replace(   # a way back: the compare page is the report module's own HTML
        "<body>", '<body><p><a id="back" href="/submissions">← Submissions</a></p>', 1)
    hashes = " ".join(f"'sha256-{h}'" for h in grading.compare_script_hashes())
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {hashes}; "
           "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    return HTMLResponse(page, headers={"Content-Security-Policy": csp, "Cache-Control": "no-store"})
