"""Bearer tokens with roles. Tokens are random (``gr_`` + 43 url-safe characters), stored as their SHA-256,
revocable, optionally expiring. A candidate token is bound to one candidate name.

The pages sign in by putting the token in an HttpOnly, SameSite=Strict cookie; the API accepts that cookie for
GET requests only, so a forged cross-site form can never change anything through the API (the pages' own forms
carry a CSRF token derived from the session)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

from fastapi import Request

from harness.service.errors import ApiError

COOKIE = "grader_session"
ROLES = ("admin", "interviewer", "candidate")
STAFF = ("admin", "interviewer")


@dataclasses.dataclass(frozen=True)
class Principal:
    token_id: int
    role: str
    name: str
    candidate: str | None

    @property
    def audience(self) -> str:
        return "candidate" if self.role == "candidate" else "interviewer"

    @property
    def is_staff(self) -> bool:
        return self.role in STAFF


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ApiError(401, "unauthorized", "the Authorization header must be 'Bearer <token>'",
                       headers={"WWW-Authenticate": "Bearer"})
    return value.strip()


def lookup(request: Request, secret: str) -> Principal | None:
    row = request.app.state.store.find_token(secret)
    if row is None:
        return None
    return Principal(token_id=row["id"], role=row["role"], name=row["name"], candidate=row["candidate"])


def principal(request: Request) -> Principal:
    """The caller; 401 when there is no valid token."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    secret = _bearer(request)
    if secret is None and request.method in ("GET", "HEAD"):
        secret = request.cookies.get(COOKIE)
    if not secret:
        raise ApiError(401, "unauthorized", "a bearer token is required (Authorization: Bearer <token>)",
                       headers={"WWW-Authenticate": "Bearer"})
    who = lookup(request, secret)
    if who is None:
        request.app.state.metrics.inc("grader_rejections_total", reason="unauthorized")
        raise ApiError(401, "unauthorized", "the token is unknown, revoked or expired",
                       headers={"WWW-Authenticate": "Bearer"})
    request.state.principal = who
    return who


def require(who: Principal, *roles: str) -> Principal:
    if who.role not in roles:
        raise ApiError(403, "forbidden", f"this needs a token with role {' or '.join(roles)} (yours: {who.role})")
    return who


def staff(request: Request) -> Principal:
    who = principal(request)
    if not who.is_staff:
        request.app.state.metrics.inc("grader_rejections_total", reason="forbidden")
    return require(who, *STAFF)


def admin(request: Request) -> Principal:
    who = principal(request)
    if who.role != "admin":
        request.app.state.metrics.inc("grader_rejections_total", reason="forbidden")
    return require(who, "admin")


def can_see(who: Principal, row: dict) -> bool:
    return who.is_staff or (row["candidate"] is not None and row["candidate"] == who.candidate)


def csrf_token(secret_key: str, session_token: str) -> str:
    return hmac.new(secret_key.encode(), b"csrf:" + session_token.encode(), hashlib.sha256).hexdigest()


def check_csrf(secret_key: str, session_token: str, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(csrf_token(secret_key, session_token), sent)
