"""/v1/candidates: the candidate records (staff): find them by a case-insensitive part of the display name,
read one with their rounds and submissions."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from harness.service import views
from harness.service.api.common import error_responses
from harness.service.auth import Principal, staff
from harness.service.errors import ApiError
from harness.service.store import candidates, rounds as store_rounds
from harness.service.store.repository import iso

router = APIRouter(prefix="/v1/candidates", tags=["candidates"])


def candidate_view(c: dict) -> dict:
    return {"id": c["id"], "display_name": c["display_name"], "email": c["email"], "external_ref": c["external_ref"],
            "created_at": iso(c["created_at"])}


@router.get("", responses=error_responses(401, 403, 422))
def list_candidates(request: Request, q: str | None = Query(None, max_length=200,
                                                            description="a case-insensitive part of the name"),
                    limit: int = Query(100, ge=1, le=500), who: Principal = Depends(staff)):
    return [candidate_view(c) for c in candidates.search(request.app.state.store, q, limit)]


@router.get("/{candidate_id}", responses=error_responses(401, 403, 404))
def get_candidate(candidate_id: str, request: Request, who: Principal = Depends(staff)):
    store = request.app.state.store
    c = candidates.get(store, candidate_id)
    if c is None:
        raise ApiError(404, "not_found", f"no candidate {candidate_id!r}")
    subs = store.list_submissions(candidate_id=candidate_id, limit=200)
    return {**candidate_view(c),
            "rounds": [{"id": r["id"], "name": r["name"], "started_at": iso(r["started_at"])}
                       for r in store_rounds.memberships(store, candidate_id)],
            "submissions": [views.submission_view(s) for s in subs]}
