"""Server-side sessions of the pages: the cookie holds a random id; the store keeps its SHA-256, the token the
session acts as and the expiry. Signing out ends the session; revoking the token ends every session of it."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import delete, select, update

from harness.service.store.models import Token, WebSession
from harness.service.store.repository import _row, hash_token, now

TTL_S = 12 * 3600


def open_session(store, token_id: int, ttl_s: float = TTL_S) -> str:
    """A new session for this token; its secret (for the cookie) is returned and stored only hashed."""
    secret = "gs_" + secrets.token_urlsafe(32)
    t = now()
    with store.session() as s:
        s.execute(delete(WebSession).where(WebSession.expires_at < t - dt.timedelta(days=1)))  # old ones go
        s.add(WebSession(id_hash=hash_token(secret), token_id=token_id, created_at=t,
                         expires_at=t + dt.timedelta(seconds=ttl_s)))
    return secret


def token_of(store, secret: str) -> dict | None:
    """The token row behind a live session (session not ended or expired, token not revoked or expired)."""
    if not secret or len(secret) > 100:
        return None
    t = now()
    with store.session() as s:
        row = s.execute(select(Token, WebSession.expires_at).join(WebSession, WebSession.token_id == Token.id)
                        .where(WebSession.id_hash == hash_token(secret), WebSession.ended_at.is_(None))).first()
        if row is None:
            return None
        tok, session_expires = row
        if session_expires <= t or tok.revoked_at is not None or (tok.expires_at is not None and tok.expires_at <= t):
            return None
        return _row(tok)


def end(store, secret: str) -> bool:
    with store.session() as s:
        res = s.execute(update(WebSession).where(WebSession.id_hash == hash_token(secret),
                                                 WebSession.ended_at.is_(None)).values(ended_at=now()))
        return res.rowcount == 1


def end_for_token(store, token_id: int) -> int:
    with store.session() as s:
        res = s.execute(update(WebSession).where(WebSession.token_id == token_id, WebSession.ended_at.is_(None))
                        .values(ended_at=now()))
        return res.rowcount
