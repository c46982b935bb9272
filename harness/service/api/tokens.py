"""/v1/tokens: token management (admin)."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse

from harness.service.auth import Principal, admin
from harness.service.errors import ApiError
from harness.service.models import TokenCreate, TokenCreated, TokenOut
from harness.service.store.repository import iso, now
from harness.service.api.common import error_responses

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


def token_view(t: dict) -> dict:
    return {"id": t["id"], "name": t["name"], "role": t["role"], "candidate": t["candidate"], "prefix": t["prefix"],
            "created_at": iso(t["created_at"]), "expires_at": iso(t["expires_at"]),
            "revoked_at": iso(t["revoked_at"])}


@router.get("", response_model=list[TokenOut], responses=error_responses(401, 403))
def list_tokens(request: Request, who: Principal = Depends(admin)):
    return [token_view(t) for t in request.app.state.store.list_tokens()]


@router.post("", response_model=TokenCreated, status_code=201, responses=error_responses(401, 403, 422))
def create_token(body: TokenCreate, request: Request, who: Principal = Depends(admin)):
    """A new token; its secret is in the answer and nowhere else."""
    expires = now() + dt.timedelta(days=body.expires_in_days) if body.expires_in_days else None
    secret, row = request.app.state.store.create_token(role=body.role, name=body.name, candidate=body.candidate,
                                                       expires_at=expires)
    return JSONResponse({**token_view(row), "token": secret}, status_code=201)


@router.delete("/{token_id}", status_code=204, responses=error_responses(401, 403, 404))
def revoke_token(request: Request, token_id: int = Path(ge=1, le=2**31 - 1), who: Principal = Depends(admin)):
    if not request.app.state.store.revoke_token(token_id):
        raise ApiError(404, "not_found", f"no active token {token_id}")
    from fastapi import Response

    return Response(status_code=204)
