"""The review pages (issue 25), staff only: a candidate's page (attempts per round and exercise on a timeline,
notes, deletion and export), an attempt's review (highlighted source, download, diff with the previous attempt,
rubric, override, notes, report versions, the audit trail), and per round the similarity list and analytics."""

from __future__ import annotations


from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from harness.service import grading, review, similarity
from harness.service.pages.rounds import _staff_or
from harness.service.pages.views import _form_csrf_ok, _render
from harness.service.store import candidates, review as store_review, rounds as store_rounds
from harness.service.store.repository import iso

router = APIRouter(include_in_schema=False)


def actor(who) -> str:
    return f"{who.name} ({who.id})"


def _not_found(request, who, what: str):
    return _render(request, "message.html", 404, who=who, title="Not found", message=f"No such {what}.")


def _expired(request, who):
    return _render(request, "message.html", 403, who=who, title="Form expired",
                   message="The form expired; reload the page and try again.")


async def _staff_form(request):
    """(who, the form, None) for a staff session whose form carries a valid CSRF token; else a response."""
    who, resp = _staff_or(request)
    if resp:
        return who, None, resp
    form = await request.form()
    if not await _form_csrf_ok(request, form):
        return who, form, _expired(request, who)
    return who, form, None


def _candidate_page(request, who, cand_id, round_id="", error=None, status=200):
    store = request.app.state.store
    c = candidates.get(store, cand_id)
    if c is None:
        return _not_found(request, who, "candidate")
    story = review.candidate_story(store, cand_id, round_id or None)
    sub_ids = [a["id"] for g in story for a in g["attempts"]]
    return _render(request, "candidate.html", status, who=who, c=c, story=story, round_id=round_id, error=error,
                   notes=store_review.notes(store, candidate_id=cand_id),
                   trail=store_review.audit_trail(store, candidate_id=cand_id, submission_ids=sub_ids),
                   rounds={m["id"]: m for m in store_rounds.memberships(store, cand_id)}, iso=iso)


@router.get("/candidates/{cand_id}", response_class=HTMLResponse)
def candidate_page(request: Request, cand_id: str, round: str = ""):
    who, resp = _staff_or(request)
    return resp or _candidate_page(request, who, cand_id, round[:32])


@router.post("/candidates/{cand_id}/notes")
async def candidate_note(request: Request, cand_id: str):
    who, form, resp = await _staff_form(request)
    if resp:
        return resp
    body = str(form.get("body") or "").strip()[:10000]
    if not body or candidates.get(request.app.state.store, cand_id) is None:
        return _candidate_page(request, who, cand_id, error="Write the note first.", status=422)
    store_review.add_note(request.app.state.store, body=body, by=actor(who), candidate_id=cand_id)
    return RedirectResponse(f"/candidates/{cand_id}#notes", status_code=303)


@router.post("/candidates/{cand_id}/delete")
async def candidate_delete(request: Request, cand_id: str):
    who, form, resp = await _staff_form(request)
    if resp:
        return resp
    if str(form.get("confirm") or "") != cand_id:
        return _candidate_page(request, who, cand_id, error="Type the candidate id to confirm the deletion.",
                               status=422)
    counts = store_review.delete_candidate(request.app.state.store, cand_id, by=actor(who))
    if counts is None:
        return _not_found(request, who, "candidate")
    return _render(request, "message.html", who=who, title="Candidate deleted",
                   message=f"Deleted {counts['submissions']} submission(s) and {counts['tokens']} token(s) with "
                           "everything attached to them.")


@router.get("/candidates/{cand_id}/export.zip")
def candidate_export(request: Request, cand_id: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    data = review.export_zip(request.app.state.store, cand_id)
    if data is None:
        return _not_found(request, who, "candidate")
    return Response(data, media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{cand_id}.zip"',
                             "Cache-Control": "no-store"})


# -- one attempt --------------------------------------------------------------------------------------------------
def _attempt(store, sub_id: str):
    row = store.get(sub_id) if len(sub_id) <= 64 else None
    if row is None:
        return None, None, None
    if not row.get("candidate_id"):
        row.update(attempt=1, round_started_at=None, override=store_review.overrides(store, [sub_id]).get(sub_id))
        return row, None, [row]
    atts = [a for a in store_review.attempts_of(store, row["candidate_id"])
            if a["round_id"] == row["round_id"] and a["exercise"] == row["exercise"]]
    i = next(i for i, a in enumerate(atts) if a["id"] == sub_id)
    return atts[i], atts[i - 1] if i > 0 else None, atts


def _review_page(request, who, sub_id, *, version: int = 0, error=None, status=200):
    store = request.app.state.store
    row, prev, atts = _attempt(store, sub_id)
    if row is None:
        return _not_found(request, who, "submission")
    shown = store_review.version(store, sub_id, version) if version else None
    report_json = shown["report_json"] if shown else row["report_json"]
    report = grading.load_report(report_json) if report_json else None
    r = store_rounds.get(store, row["round_id"]) if row["round_id"] else None
    return _render(
        request, "attempt.html", status, who=who, sub=review.attempt_view(row), row=row, round=r, error=error,
        source=review.highlight(row["source"]), diff=review.diff_table(prev, row) if prev else None, prev=prev,
        attempts=[review.attempt_view(a) for a in atts], rubric=store_review.rubric_for(store, row),
        versions=store_review.versions(store, sub_id), shown=shown, iso=iso,
        summary=grading.summary_lines(report, audience="interviewer") if report else [],
        notes=[n for n in store_review.notes(store, candidate_id=row["candidate_id"]) if n["submission_id"] == sub_id]
        if row.get("candidate_id") else [],
        trail=store_review.audit_trail(store, submission_ids=[sub_id]))


@router.get("/review/{sub_id}", response_class=HTMLResponse)
def review_page(request: Request, sub_id: str, version: int = 0):
    who, resp = _staff_or(request)
    return resp or _review_page(request, who, sub_id, version=max(0, min(version, 10**6)))


@router.get("/review/{sub_id}/source")
def source_download(request: Request, sub_id: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    row = request.app.state.store.get(sub_id) if len(sub_id) <= 64 else None
    if row is None:
        return _not_found(request, who, "submission")
    return source_response(row)


def source_response(row: dict) -> Response:
    return Response(row["source"], media_type="text/x-python; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{row["id"][:12]}-{row["filename"]}"',
                             "Cache-Control": "no-store"})


@router.post("/review/{sub_id}/{what}")
async def review_action(request: Request, sub_id: str, what: str):
    who, form, resp = await _staff_form(request)
    if resp:
        return resp
    store = request.app.state.store
    row = store.get(sub_id) if len(sub_id) <= 64 else None
    if row is None or what not in ("rubric", "override", "notes"):
        return _not_found(request, who, "submission")
    try:
        if what == "notes":
            body = str(form.get("body") or "").strip()[:10000]
            if not body:
                raise ValueError("Write the note first.")
            store_review.add_note(store, body=body, by=actor(who), candidate_id=row["candidate_id"], submission=row)
        elif what == "override":
            value = str(form.get("score") or "").strip()
            store_review.set_override(store, row, float(value) if value else None, str(form.get("reason") or ""),
                                      by=actor(who))
        else:
            current = {c["id"]: c for c in store_review.rubric_for(store, row)}
            for key, value in form.items():
                if key.startswith("c_") and str(value).strip():
                    cid = int(key[2:])
                    if cid in current and current[cid]["points"] != float(value):   # unchanged: stays as it was
                        store_review.score_criterion(store, row, cid, float(value), by=actor(who))
    except (ValueError, KeyError) as exc:
        return _review_page(request, who, sub_id, error=str(exc) if isinstance(exc, ValueError) else "Unknown "
                            "criterion.", status=422)
    return RedirectResponse(f"/review/{sub_id}#{what}", status_code=303)


# -- per round ----------------------------------------------------------------------------------------------------
def _round_or_404(request, who, round_id):
    r = store_rounds.get(request.app.state.store, round_id)
    return r, (None if r else _not_found(request, who, "round"))


@router.get("/rounds/{round_id}/similarity", response_class=HTMLResponse)
def similarity_page(request: Request, round_id: str, threshold: float | None = None):
    who, resp = _staff_or(request)
    if resp:
        return resp
    r, resp = _round_or_404(request, who, round_id)
    if resp:
        return resp
    store = request.app.state.store
    limit = threshold if threshold is not None else (store_review.settings_of(store, round_id)["similarity_threshold"]
                                                    or similarity.THRESHOLD)
    rows = [x for x in store.list_submissions(round_id=round_id, limit=1000)]
    found = similarity.pairs(rows, threshold=limit)
    return _render(request, "similarity.html", who=who, r=r, threshold=limit, pairs=[
        {"p": p, "a_html": similarity.highlighted(p.a["source"], p.slices_a),
         "b_html": similarity.highlighted(p.b["source"], p.slices_b)} for p in found], iso=iso)


@router.get("/rounds/{round_id}/analytics", response_class=HTMLResponse)
def analytics_page(request: Request, round_id: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    r, resp = _round_or_404(request, who, round_id)
    if resp:
        return resp
    stats = round_analytics(request.app.state.store, round_id)
    charts = [{"s": s, "hist": review.bar_svg([(f"{i * 10}–{i * 10 + 10}%", n) for i, n in enumerate(s["histogram"])],
                                              title=f"{s['exercise']}: best score per candidate"),
               "bugs": review.bar_svg(s["bugs"], title=f"{s['exercise']}: mistakes diagnosed most"),
               "tests": review.bar_svg(s["tests_failed"], title=f"{s['exercise']}: tests failed most")}
              for s in stats]
    return _render(request, "analytics.html", who=who, r=r, charts=charts)


def round_analytics(store, round_id: str) -> list[dict]:
    rows = store.list_submissions(round_id=round_id, limit=5000)
    started = {m["id"]: m["started_at"] for m in store_rounds.members(store, round_id)}
    return review.analytics(rows, store_review.overrides(store, [x["id"] for x in rows]), started)


@router.post("/rounds/{round_id}/review")
async def round_review_settings(request: Request, round_id: str):
    """The round's rubric (one criterion per line: name, max points, description) and review settings."""
    who, form, resp = await _staff_form(request)
    if resp:
        return resp
    r, resp = _round_or_404(request, who, round_id)
    if resp:
        return resp
    store = request.app.state.store
    try:
        items = parse_rubric(str(form.get("rubric") or ""))
        days = str(form.get("retention_days") or "").strip()
        thr = str(form.get("similarity_threshold") or "").strip()
        settings = {"retention_days": int(days) if days else None,
                    "similarity_threshold": float(thr) if thr else None}
        if (settings["retention_days"] or 0) < 0 or not 0 <= (settings["similarity_threshold"] or 0) <= 1:
            raise ValueError("retention days >= 0; a threshold between 0 and 1")
    except ValueError as exc:
        return _render(request, "message.html", 422, who=who, title="Not saved", message=str(exc))
    store_review.set_criteria(store, round_id, items, by=actor(who))
    if settings != store_review.settings_of(store, round_id):
        store_review.set_settings(store, round_id, by=actor(who), **settings)
    return RedirectResponse(f"/rounds/{round_id}/rubric", status_code=303)


@router.get("/rounds/{round_id}/rubric", response_class=HTMLResponse)
def rubric_page(request: Request, round_id: str):
    who, resp = _staff_or(request)
    if resp:
        return resp
    r, resp = _round_or_404(request, who, round_id)
    if resp:
        return resp
    store = request.app.state.store
    crit = store_review.criteria(store, round_id)
    text = "\n".join(f"{c['name']}, {c['max_points']:g}, {c['description'] or ''}" for c in crit) if crit else \
        f"{store_review.DEFAULT_CRITERION['name']}, 100, {store_review.DEFAULT_CRITERION['description']}"
    return _render(request, "rubric.html", who=who, r=r, criteria=crit, text=text,
                   settings=store_review.settings_of(store, round_id),
                   trail=store_review.audit_trail(store, round_id=round_id), iso=iso,
                   members=store_rounds.members(store, round_id))


def parse_rubric(text: str) -> list[dict]:
    """Lines ``name, max points, description``; the first criterion named Correctness is pre-filled from the grade."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _, rest = line.partition(",")
        pts, _, desc = rest.partition(",")
        name = name.strip()[:200]
        try:
            mx = float(pts)
        except ValueError:
            raise ValueError(f"{name or line!r}: the maximum points must be a number") from None
        if not name or not 0 < mx <= 10000:
            raise ValueError(f"{line.strip()!r}: a name and a maximum between 0 and 10000")
        if name in {o["name"] for o in out}:
            raise ValueError(f"{name!r} twice")
        out.append({"name": name, "max_points": mx, "description": desc.strip()[:2000] or None,
                    "from_grade": name.lower() == "correctness"})
    return out
