"""/v1/tokens: token management (admin). Candidates are invited to rounds (/v1/rounds/{id}/invitations);
candidate tokens made here belong to a new candidate record, or to ``candidate_id``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse

from harness.service.auth import Principal, admin
from harness.service.errors import ApiError
from harness.service.models import TokenCreate, TokenCreated, TokenOut
from harness.core.errors import UsageError
from harness.service.durations import parse_time
from harness.service.store import staff as staff_store
from harness.service.store.repository import iso, now
from harness.service.api.common import error_responses

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


def token_view(t: dict) -> dict:
    return {"id": t["id"], "name": t["name"], "role": t["role"], "candidate": t["candidate"],
            "candidate_id": t.get("candidate_id"), "prefix": t["prefix"],
            "created_at": iso(t["created_at"]), "expires_at": iso(t["expires_at"]),
            "revoked_at": iso(t["revoked_at"])}


@router.get("", response_model=list[TokenOut], responses=error_responses(401, 403))
def list_tokens(request: Request, who: Principal = Depends(admin)):
    return [token_view(t) for t in request.app.state.store.list_tokens()]


@router.post("", response_model=TokenCreated, status_code=201, responses=error_responses(401, 403, 422))
def create_token(body: TokenCreate, request: Request, who: Principal = Depends(admin)):
    """A new token; its secret is in the answer and nowhere else."""
    try:
        expires = parse_time(body.expires, "expires") if body.expires else None
    except UsageError as exc:
        raise ApiError(422, "invalid", exc.message) from None
    if expires is not None and expires <= now():
        raise ApiError(422, "invalid", "expires: must be in the future")
    if body.candidate_id and body.role != "candidate":
        raise ApiError(422, "invalid", "candidate_id: only for role candidate")
    try:
        secret, row = request.app.state.store.create_token(role=body.role, name=body.name, candidate=body.candidate,
                                                           expires_at=expires, candidate_id=body.candidate_id)
    except ValueError as exc:
        raise ApiError(422, "invalid", f"candidate_id: {exc}") from None
    return JSONResponse({**token_view(row), "token": secret}, status_code=201)


@router.delete("/{token_id}", status_code=204, responses=error_responses(401, 403, 404, 409))
def revoke_token(request: Request, token_id: int = Path(ge=1, le=2**31 - 1), who: Principal = Depends(admin)):
    """Revoke a token and end its sessions; the last active admin token cannot be revoked (409 last_admin)."""
    try:
        if not staff_store.revoke(request.app.state.store, token_id):
            raise ApiError(404, "not_found", f"no active token {token_id}")
    except staff_store.LastAdmin as exc:
        raise ApiError(409, "last_admin", str(exc)) from None
    from fastapi import Response

    return Response(status_code=204)
