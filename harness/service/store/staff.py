"""Staff tokens: revoking one ends its sessions, and the last active admin token cannot be revoked."""

from __future__ import annotations

from sqlalchemy import or_, select, update

from harness.service.store.models import Token, WebSession
from harness.service.store.repository import now


class LastAdmin(Exception):
    """Revoking this token would leave no active admin."""


def revoke(store, token_id: int) -> bool:
    """Revoke the token and end its sessions (False: no active token with this id); LastAdmin if it is the only
    active admin. One transaction, the admin rows locked (Postgres), so two admins cannot revoke each other."""
    t = now()
    with store.session() as s:
        q = select(Token).where(Token.revoked_at.is_(None), or_(Token.expires_at.is_(None), Token.expires_at > t),
                                or_(Token.id == token_id, Token.role == "admin"))
        rows = list(s.scalars(q if store.is_sqlite else q.with_for_update()))
        tok = next((r for r in rows if r.id == token_id), None)
        if tok is None:
            return False
        if tok.role == "admin" and not any(r.role == "admin" and r.id != token_id for r in rows):
            raise LastAdmin(f"token {token_id} is the last active admin token; create another admin first")
        tok.revoked_at = t
        s.execute(update(WebSession).where(WebSession.token_id == token_id, WebSession.ended_at.is_(None))
                  .values(ended_at=t))
        return True
