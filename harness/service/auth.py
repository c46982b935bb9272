"""Bearer tokens with roles. Tokens are random (``gr_`` + 43 url-safe characters), stored as their SHA-256,
revocable, optionally expiring. A candidate token belongs to one candidate record (an id; the name is a label).

The pages sign in with a server-side session: the HttpOnly, SameSite=Strict cookie holds a random session id
(stored hashed, with its expiry and the token it acts as); signing out or revoking the token ends it, and no
bearer token is ever put in a cookie. The API accepts the session cookie for GET requests only, so a forged
cross-site form can never change anything through the API (the pages' own forms carry a CSRF token derived from
the session)."""

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
    candidate: str | None                 # the display name (a label)
    candidate_id: str | None = None       # what the candidate's access rests on

    @property
    def id(self) -> str:
        """For logs: who acted, never a secret."""
        return f"token:{self.token_id}"

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


def _principal_of(row: dict | None) -> Principal | None:
    if row is None:
        return None
    return Principal(token_id=row["id"], role=row["role"], name=row["name"], candidate=row["candidate"],
                     candidate_id=row.get("candidate_id"))


def lookup(request: Request, secret: str) -> Principal | None:
    """The principal of a bearer token."""
    return _principal_of(request.app.state.store.find_token(secret))


def session_principal(request: Request) -> Principal | None:
    """The principal of the page session in the request's cookie (None: none, ended or expired)."""
    from harness.service.store import sessions

    sid = request.cookies.get(COOKIE)
    who = _principal_of(sessions.token_of(request.app.state.store, sid)) if sid else None
    if who is not None:
        request.state.principal = who
    return who


def principal(request: Request) -> Principal:
    """The caller; 401 when there is no valid token."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    secret = _bearer(request)
    if secret is None and request.method in ("GET", "HEAD") and request.cookies.get(COOKIE):
        who = session_principal(request)
    elif not secret:
        raise ApiError(401, "unauthorized", "a bearer token is required (Authorization: Bearer <token>)",
                       headers={"WWW-Authenticate": "Bearer"})
    else:
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
    return who.is_staff or (row.get("candidate_id") is not None and row["candidate_id"] == who.candidate_id)


def csrf_token(secret_key: str, session_token: str) -> str:
    return hmac.new(secret_key.encode(), b"csrf:" + session_token.encode(), hashlib.sha256).hexdigest()


def check_csrf(secret_key: str, session_token: str, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(csrf_token(secret_key, session_token), sent)
