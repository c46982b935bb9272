"""/v1/review: interviewer review over the API (issue 25), staff only — a candidate's attempts, deletion and
export; an attempt's source, report versions, rubric scores, override and notes; a round's rubric, settings,
similar pairs and analytics; the retention purge."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from harness.service import review, similarity
from harness.service.api.common import error_responses
from harness.service.auth import Principal, staff
from harness.service.errors import ApiError
from harness.service.store import candidates, review as store_review, rounds as store_rounds
from harness.service.store.repository import iso

router = APIRouter(prefix="/v1/review", tags=["review"], responses=error_responses(401, 403, 404, 409, 422))


def _actor(who: Principal) -> str:
    return f"{who.name} ({who.id})"


def _sub(request: Request, sub_id: str) -> dict:
    row = request.app.state.store.get(sub_id) if len(sub_id) <= 64 else None
    if row is None:
        raise ApiError(404, "not_found", f"no submission {sub_id!r}")
    return row


def _round(request: Request, round_id: str) -> dict:
    r = store_rounds.get(request.app.state.store, round_id)
    if r is None:
        raise ApiError(404, "not_found", f"no round {round_id!r}")
    return r


def _jsonable(x):
    return json.loads(json.dumps(x, default=lambda v: iso(v) if hasattr(v, "isoformat") else str(v)))


@router.get("/candidates/{cand_id}")
def candidate(cand_id: str, request: Request, round: str | None = Query(None, max_length=32), who: Principal = Depends(staff)):
    """The candidate's attempts per round and exercise (timeline, best, last, attempts used, time to pass)."""
    store = request.app.state.store
    c = candidates.get(store, cand_id)
    if c is None:
        raise ApiError(404, "not_found", f"no candidate {cand_id!r}")
    return _jsonable({"candidate": c, "exercises": review.candidate_story(store, cand_id, round),
                      "notes": store_review.notes(store, candidate_id=cand_id)})


@router.delete("/candidates/{cand_id}")
def delete_candidate(cand_id: str, request: Request, who: Principal = Depends(staff)):
    counts = store_review.delete_candidate(request.app.state.store, cand_id, by=_actor(who))
    if counts is None:
        raise ApiError(404, "not_found", f"no candidate {cand_id!r}")
    return {"deleted": counts}


@router.get("/candidates/{cand_id}/export", responses={200: {"content": {"application/zip": {}}}})
def export_candidate(cand_id: str, request: Request, who: Principal = Depends(staff)):
    data = review.export_zip(request.app.state.store, cand_id)
    if data is None:
        raise ApiError(404, "not_found", f"no candidate {cand_id!r}")
    return Response(data, media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{cand_id}.zip"'})


class NoteIn(BaseModel):
    body: str = Field(min_length=1, max_length=10000)


@router.post("/candidates/{cand_id}/notes", status_code=201)
def candidate_note(cand_id: str, body: NoteIn, request: Request, who: Principal = Depends(staff)):
    if candidates.get(request.app.state.store, cand_id) is None:
        raise ApiError(404, "not_found", f"no candidate {cand_id!r}")
    return _jsonable(store_review.add_note(request.app.state.store, body=body.body, by=_actor(who),
                                           candidate_id=cand_id))


@router.get("/submissions/{sub_id}/source", responses={200: {"content": {"text/x-python": {}}}})
def source(sub_id: str, request: Request, who: Principal = Depends(staff)):
    from harness.service.pages.review import source_response

    return source_response(_sub(request, sub_id))


@router.get("/submissions/{sub_id}/versions")
def versions(sub_id: str, request: Request, who: Principal = Depends(staff)):
    """Earlier report versions (without the reports; GET …/versions/{n} for one) and the latest."""
    row = _sub(request, sub_id)
    old = store_review.versions(request.app.state.store, sub_id)
    return _jsonable({"latest": len(old) + 1, "versions": [{k: v for k, v in x.items() if k != "report_json"}
                                                            for x in old]})


@router.get("/submissions/{sub_id}/versions/{number}")
def version(sub_id: str, request: Request, number: int = Path(ge=1, le=10**6), who: Principal = Depends(staff)):
    row = _sub(request, sub_id)
    v = store_review.version(request.app.state.store, sub_id, number)
    if v is None:
        latest = len(store_review.versions(request.app.state.store, sub_id)) + 1
        if number == latest and row["report_json"]:
            return json.loads(row["report_json"])
        raise ApiError(404, "not_found", f"no version {number} (the latest is {latest})")
    return json.loads(v["report_json"]) if v["report_json"] else {}


class ScoresIn(BaseModel):
    scores: dict[str, float] = Field(description="{criterion name: points}")


@router.post("/submissions/{sub_id}/rubric")
def score(sub_id: str, body: ScoresIn, request: Request, who: Principal = Depends(staff)):
    store = request.app.state.store
    row = _sub(request, sub_id)
    by_name = {c["name"]: c for c in store_review.rubric_for(store, row)}
    for name, pts in body.scores.items():
        if name not in by_name:
            raise ApiError(422, "invalid", f"no criterion {name!r} in this round's rubric")
        try:
            store_review.score_criterion(store, row, by_name[name]["id"], pts, by=_actor(who))
        except ValueError as exc:
            raise ApiError(422, "invalid", str(exc)) from None
    return _jsonable({"rubric": store_review.rubric_for(store, row)})


class OverrideIn(BaseModel):
    score: float | None = Field(description="the final score; null removes the override")
    reason: str = Field(min_length=1, max_length=2000)


@router.post("/submissions/{sub_id}/override")
def override(sub_id: str, body: OverrideIn, request: Request, who: Principal = Depends(staff)):
    try:
        got = store_review.set_override(request.app.state.store, _sub(request, sub_id), body.score, body.reason,
                                        by=_actor(who))
    except ValueError as exc:
        raise ApiError(422, "invalid", str(exc)) from None
    return _jsonable({"override": got})


@router.post("/submissions/{sub_id}/notes", status_code=201)
def note(sub_id: str, body: NoteIn, request: Request, who: Principal = Depends(staff)):
    row = _sub(request, sub_id)
    return _jsonable(store_review.add_note(request.app.state.store, body=body.body, by=_actor(who),
                                           candidate_id=row["candidate_id"], submission=row))


@router.get("/submissions/{sub_id}/audit")
def audit(sub_id: str, request: Request, who: Principal = Depends(staff)):
    _sub(request, sub_id)
    return _jsonable(store_review.audit_trail(request.app.state.store, submission_ids=[sub_id]))


class Criterion(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    max_points: float = Field(gt=0, le=10000)
    description: str | None = Field(None, max_length=2000)
    from_grade: bool = False


class RubricIn(BaseModel):
    criteria: list[Criterion] = Field(max_length=50)


@router.put("/rounds/{round_id}/rubric")
def set_rubric(round_id: str, body: RubricIn, request: Request, who: Principal = Depends(staff)):
    _round(request, round_id)
    names = [c.name for c in body.criteria]
    if len(set(names)) != len(names):
        raise ApiError(422, "invalid", "criteria names must differ")
    return _jsonable(store_review.set_criteria(request.app.state.store, round_id,
                                               [c.model_dump() for c in body.criteria], by=_actor(who)))


class SettingsIn(BaseModel):
    retention_days: int | None = Field(None, ge=0, le=36500)
    similarity_threshold: float | None = Field(None, ge=0, le=1)


@router.put("/rounds/{round_id}/settings")
def set_settings(round_id: str, body: SettingsIn, request: Request, who: Principal = Depends(staff)):
    _round(request, round_id)
    return store_review.set_settings(request.app.state.store, round_id, by=_actor(who), **body.model_dump())


@router.get("/rounds/{round_id}/similarity")
def similar(round_id: str, request: Request, threshold: float | None = Query(None, ge=0, le=1), who: Principal = Depends(staff)):
    _round(request, round_id)
    store = request.app.state.store
    limit = threshold if threshold is not None else (store_review.settings_of(store, round_id)["similarity_threshold"]
                                                    or similarity.THRESHOLD)
    found = similarity.pairs(store.list_submissions(round_id=round_id, limit=1000), threshold=limit)
    return {"threshold": limit, "pairs": [
        {"exercise": p.a["exercise"], "score": round(p.score, 4), "identical": p.identical,
         "a": {"submission": p.a["id"], "candidate_id": p.a["candidate_id"], "ranges": p.slices_a},
         "b": {"submission": p.b["id"], "candidate_id": p.b["candidate_id"], "ranges": p.slices_b}} for p in found]}


@router.get("/rounds/{round_id}/analytics")
def analytics(round_id: str, request: Request, who: Principal = Depends(staff)):
    from harness.service.pages.review import round_analytics

    _round(request, round_id)
    return round_analytics(request.app.state.store, round_id)


@router.post("/purge")
def purge(request: Request, who: Principal = Depends(staff)):
    """Purge the rounds whose retention period ended now (the service also does it by itself, hourly)."""
    return JSONResponse({"purged": store_review.purge_expired(request.app.state.store)})
