"""The rounds' store under concurrency, on SQLite and Postgres: an invitation redeemed by many threads at once
opens exactly one session; a candidate's admissions are serialized across connections (Postgres advisory lock),
so the attempt limit cannot be passed by submitting in parallel to several API processes."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from harness.service import rounds
from harness.service.auth import Principal
from harness.service.store import invitations, rounds as store_rounds
from harness.service.store.repository import now
from tests.test_service_migrations import store  # noqa: F401  (a migrated store, SQLite and Postgres)


def _round(store, **kw) -> dict:
    t = now()
    args = dict(name="r", exercises={"mha": ["numpy"]}, opens_at=t, closes_at=t + dt.timedelta(hours=2),
                time_limit_s=None, max_attempts=1, feedback="full", feedback_after=None, created_by=None)
    return store_rounds.create(store, **{**args, **kw})


def test_an_invitation_opens_once_under_a_race(store):
    r = _round(store)
    ((secret, inv, cand),) = invitations.invite(store, r["id"], [{"display_name": "Ada"}],
                                                expires_at=r["ends_at"], created_by=None)
    got, barrier = [], threading.Barrier(8)

    def go():
        barrier.wait()
        got.append(invitations.redeem(store, secret))

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(x is not None for x in got) == 1
    assert invitations.for_round(store, r["id"])[0]["state"] == "used"
    assert invitations.peek(store, secret) is None and invitations.redeem(store, secret) is None


def test_admissions_of_one_candidate_are_serialized(store):
    r = _round(store)
    ((_, _, cand),) = invitations.invite(store, r["id"], [{"display_name": "Ada"}], expires_at=r["ends_at"],
                                         created_by=None)
    who = Principal(token_id=1, role="candidate", name="Ada", candidate="Ada", candidate_id=cand["id"])
    inside, overlaps = [0], []

    def go():
        with rounds.serialized(store, who):
            inside[0] += 1
            overlaps.append(inside[0])
            time.sleep(0.05)
            inside[0] -= 1

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not store.is_sqlite:        # SQLite: one server per store, its intake lock serializes
        assert overlaps == [1, 1, 1, 1]
    assert rounds.admit(store, who, "mha", "numpy") == r["id"]
    store.create_submission(exercise="mha", track_requested="numpy", track="numpy", candidate="Ada",
                            filename="a.py", seed=0, callback_url=None, source="x = 1\n", token_id=1,
                            idempotency_key=None, candidate_id=cand["id"], round_id=r["id"])
    with pytest.raises(Exception) as exc:
        rounds.admit(store, who, "mha", "numpy")
    assert exc.value.code == "attempt_limit" and exc.value.status == 403
