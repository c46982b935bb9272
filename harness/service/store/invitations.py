"""Invitations: a single-use, expiring sign-in link for one candidate to one round. The secret is random and
stored only as its SHA-256; redeeming it is one conditional UPDATE, so a link opens at most one session."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import select, update

from harness.service.store import candidates, rounds
from harness.service.store.models import Candidate, Invitation
from harness.service.store.repository import _row, hash_token, now


def _new(s, round_id: str, candidate_id: str, expires_at: dt.datetime, created_by: int | None) -> tuple[str, dict]:
    secret = "gi_" + secrets.token_urlsafe(32)
    inv = Invitation(round_id=round_id, candidate_id=candidate_id, secret_hash=hash_token(secret),
                     created_by=created_by, created_at=now(), expires_at=expires_at)
    s.add(inv)
    s.flush()
    return secret, _row(inv)


def invite(store, round_id: str, people: list[dict], *, expires_at: dt.datetime,
           created_by: int | None) -> list[tuple[str, dict, dict]]:
    """One invitation per person (``{"candidate_id"}`` of an existing candidate, or ``{"display_name", "email",
    "external_ref"}`` for a new one), all in one transaction: [(secret, invitation, candidate)]."""
    out = []
    with store.session() as s:
        for p in people:
            if p.get("candidate_id"):
                c = s.get(Candidate, p["candidate_id"])
                if c is None:
                    raise KeyError(p["candidate_id"])
            else:
                c = candidates.add(s, display_name=p["display_name"], email=p.get("email"),
                                   external_ref=p.get("external_ref"))
            rounds.add_member(s, round_id, c.id)
            secret, inv = _new(s, round_id, c.id, expires_at, created_by)
            out.append((secret, inv, _row(c)))
    return out


def redeem(store, secret: str) -> dict | None:
    """Use the link: the invitation (once, if not revoked or expired), else None."""
    if not secret or len(secret) > 100:
        return None
    h = hash_token(secret)
    with store.session() as s:
        res = s.execute(update(Invitation).where(Invitation.secret_hash == h, Invitation.used_at.is_(None),
                                                 Invitation.revoked_at.is_(None), Invitation.expires_at > now())
                        .values(used_at=now()))
        if res.rowcount != 1:
            return None
        return _row(s.scalar(select(Invitation).where(Invitation.secret_hash == h)))


def peek(store, secret: str) -> dict | None:
    """The invitation a link names if it could still be used (nothing changes)."""
    if not secret or len(secret) > 100:
        return None
    with store.session() as s:
        inv = s.scalar(select(Invitation).where(Invitation.secret_hash == hash_token(secret)))
        if inv is None or inv.used_at or inv.revoked_at or inv.expires_at <= now():
            return None
        return _row(inv)


def get(store, inv_id: int) -> dict | None:
    with store.session() as s:
        inv = s.get(Invitation, inv_id)
        return None if inv is None else _row(inv)


def revoke(store, inv_id: int) -> bool:
    with store.session() as s:
        res = s.execute(update(Invitation).where(Invitation.id == inv_id, Invitation.used_at.is_(None),
                                                 Invitation.revoked_at.is_(None)).values(revoked_at=now()))
        return res.rowcount == 1


def resend(store, inv_id: int, *, expires_at: dt.datetime, created_by: int | None) -> tuple[str, dict] | None:
    """A fresh link for the same candidate and round; the old link, if still unused, stops working."""
    with store.session() as s:
        old = s.get(Invitation, inv_id)
        if old is None:
            return None
        if old.used_at is None and old.revoked_at is None:
            old.revoked_at = now()
        return _new(s, old.round_id, old.candidate_id, expires_at, created_by)


def state(inv: dict) -> str:
    if inv["revoked_at"]:
        return "revoked"
    if inv["used_at"]:
        return "used"
    return "expired" if inv["expires_at"] <= now() else "pending"


def for_round(store, round_id: str) -> list[dict]:
    with store.session() as s:
        rows = s.execute(select(Invitation, Candidate).join(Candidate, Candidate.id == Invitation.candidate_id)
                         .where(Invitation.round_id == round_id).order_by(Invitation.id)).all()
        return [{**_row(i), "state": state(_row(i)), "candidate": _row(c)} for i, c in rows]
