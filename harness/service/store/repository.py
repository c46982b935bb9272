"""All reads and writes of the store. State changes of a submission are single conditional UPDATEs, so two
graders (threads, processes or machines) can never both own it and a stale one can never write a report:

* claim:  queued -> running   (lease += 1 and attempts += 1; the lease number is the grader's fence on the row,
          and never goes back, while attempts counts tries since intake or the last regrade)
* finish: running -> done     only WHERE lease = <the grader's fence>; the report lands in the same row
* retry:  running -> queued   (an infrastructure fault, with backoff) or -> infrastructure_error at the cap
* recover: running rows whose lease expired (or, in embedded mode, all of them at start) -> queued
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import secrets
import threading
from pathlib import Path

from sqlalchemy import and_, create_engine, event, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from harness.service.store.models import Artifact, Base, Counter, Submission, Token, Webhook, WorkerRow
from harness.service.store import review_models as _review_models  # noqa: F401  (issue 25's tables on Base)

ROLES = ("admin", "interviewer", "candidate")
IN_FLIGHT = ("queued", "running")
STATUSES = ("queued", "running", "done", "infrastructure_error")
QUEUES = ("interactive", "bulk", "ci")   # highest priority first
READ_ONLY = "grader_read_only"   # the execution option of Store.reading()'s connections


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def iso(t: dt.datetime | None) -> str | None:
    return None if t is None else t.replace(microsecond=(t.microsecond // 1000) * 1000).isoformat() + "Z"


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _row(obj) -> dict:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}


class Conflict(Exception):
    """An Idempotency-Key reused for a different submission."""


class LimitReached(Exception):
    """A submission refused by a limit counted in the store: ``reason`` is queue_full, in_flight or rate_limit."""

    def __init__(self, reason: str, message: str, retry_after: int):
        super().__init__(message)
        self.reason, self.message, self.retry_after = reason, message, retry_after


SQLITE_POOL = 24   # SQLite connections kept open (each a file handle and its page cache, up to ~2 MB)
PG_CONNECT_TIMEOUT_S = 10   # a Postgres no packet reaches is an error after this, not a wait for TCP's ~2 minutes


class Store:
    def __init__(self, database_url: str, *, echo: bool = False):
        self.url = database_url
        self.is_sqlite = database_url.startswith("sqlite")
        kw: dict = {"echo": echo, "future": True}
        if self.is_sqlite:
            path = database_url.split("///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            kw["connect_args"] = {"check_same_thread": False, "timeout": 30}
            # Connections kept for the API's request threads (anyio's 40) and the grading threads: past the pool,
            # every checkout opened a connection and ran the pragmas below, and closed it again (QueuePool's
            # default 5 kept, 10 more made on demand).
            kw.update(pool_size=SQLITE_POOL, max_overflow=SQLITE_POOL)
        else:
            kw.update(pool_pre_ping=True, pool_size=10, max_overflow=20)
            if "connect_timeout" not in database_url:   # the URL's own ?connect_timeout= wins
                kw["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
        self.engine = create_engine(database_url, **kw)
        if self.is_sqlite:
            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn, _record):  # noqa: ANN001
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=FULL")   # a 2xx means the row survives a crash
                cur.execute("PRAGMA busy_timeout=30000")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

            # BEGIN IMMEDIATE: writers queue on the lock instead of failing to upgrade a read transaction. A
            # read-only transaction (:meth:`Store.reading`) begins deferred: under WAL it reads its snapshot
            # beside the writer and never waits for the lock (nor makes the writers wait for it)
            @event.listens_for(self.engine, "begin")
            def _begin(conn):  # noqa: ANN001
                deferred = conn.get_execution_options().get(READ_ONLY)
                conn.exec_driver_sql("BEGIN" if deferred else "BEGIN IMMEDIATE")

            @event.listens_for(self.engine, "connect")
            def _no_autobegin(dbapi_conn, _record):  # noqa: ANN001
                dbapi_conn.isolation_level = None

        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._reader = self.engine.execution_options(**{READ_ONLY: True})   # the same pool; see reading()
        self._lock = threading.Lock()

    # -- schema ------------------------------------------------------------------------------------------
    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (idempotent; safe to call at every start)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).resolve().parent / "migrations"))
        cfg.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        with self.engine.connect() as conn:
            if not self.is_sqlite:  # servers starting together on one Postgres migrate one at a time
                conn.exec_driver_sql("SELECT pg_advisory_lock(7111)")
                conn.commit()
            try:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
            finally:
                if not self.is_sqlite:
                    conn.exec_driver_sql("SELECT pg_advisory_unlock(7111)")
                    conn.commit()

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    @contextlib.contextmanager
    def session(self):
        with self._sessions() as s:
            with s.begin():
                yield s

    def reading(self):
        """A connection in a read-only transaction: on SQLite it begins deferred (a WAL snapshot, no lock), where
        every other transaction takes the write lock first. Nothing may be written through it."""
        return self._reader.begin()

    def dispose(self) -> None:
        self.engine.dispose()

    # -- tokens ------------------------------------------------------------------------------------------
    def create_token(self, *, role: str, name: str, candidate: str | None = None,
                     expires_at: dt.datetime | None = None, candidate_id: str | None = None) -> tuple[str, dict]:
        """A candidate token belongs to ``candidate_id``, or to a new candidate record named ``candidate`` (or
        ``name``): names may repeat and never grant anything."""
        from harness.service.store import candidates

        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
        if role == "candidate":
            candidate = candidate or name
        secret = "gr_" + secrets.token_urlsafe(32)
        tok = Token(name=name, role=role, candidate=candidate if role == "candidate" else None,
                    token_hash=hash_token(secret), prefix=secret[:10], created_at=now(), expires_at=expires_at)
        with self.session() as s:
            if role == "candidate":
                if candidate_id is None:
                    candidate_id = candidates.add(s, display_name=candidate).id
                elif s.get(candidates.Candidate, candidate_id) is None:
                    raise ValueError(f"no candidate {candidate_id!r}")
                tok.candidate_id = candidate_id
            s.add(tok)
            s.flush()
            return secret, _row(tok)

    def _one(self, model, *where) -> dict | None:
        """One row as a dict (what :func:`_row` gives), read without building an ORM object: the status poll
        and the token check of every request come here."""
        table = model.__table__
        with self.reading() as conn:
            r = conn.execute(select(table).where(*where)).first()
        return None if r is None else {c.key: r._mapping[c] for c in table.columns}

    def find_token(self, secret: str) -> dict | None:
        """The token's row if it exists, is not revoked and has not expired."""
        tok = self._one(Token, Token.__table__.c.token_hash == hash_token(secret))
        if tok is None or tok["revoked_at"] is not None:
            return None
        if tok["expires_at"] is not None and tok["expires_at"] <= now():
            return None
        return tok

    def list_tokens(self) -> list[dict]:
        with self.session() as s:
            return [_row(t) for t in s.scalars(select(Token).order_by(Token.id))]

    def revoke_token(self, token_id: int) -> bool:
        with self.session() as s:
            res = s.execute(update(Token).where(Token.id == token_id, Token.revoked_at.is_(None))
                            .values(revoked_at=now()))
            return res.rowcount == 1

    def count_tokens(self) -> int:
        with self.session() as s:
            return s.scalar(select(func.count()).select_from(Token))

    # -- submissions: intake -----------------------------------------------------------------------------
    def create_submission(self, *, exercise: str, track_requested: str, track: str, candidate: str | None,
                          filename: str, seed: int, callback_url: str | None, source: str, token_id: int | None,
                          idempotency_key: str | None, queue: str = "interactive", candidate_id: str | None = None,
                          round_id: str | None = None, limits: dict | None = None) -> tuple[dict, bool]:
        """(row, created). With an Idempotency-Key already used by this token: the earlier row, not a new one
        (Conflict when the key names a different submission). ``limits`` ({queue_max, max_in_flight,
        rate_per_minute}, 0 for none) are checked in the insert's own transaction, one intake at a time on the
        store (SQLite: BEGIN IMMEDIATE; Postgres: an advisory lock), so they hold across API processes;
        LimitReached when one is reached."""
        data = source.encode("utf-8")
        sha = hashlib.sha256(data).hexdigest()
        if idempotency_key:
            found = self.find_by_key(token_id, idempotency_key)
            if found is not None:
                return self.check_same(found, sha, exercise), False
        sub = Submission(id=secrets.token_hex(12), exercise=exercise, track_requested=track_requested, track=track,
                         candidate=candidate, filename=filename, seed=seed, callback_url=callback_url,
                         source=source, sha256=sha, size=len(data), token_id=token_id,
                         idempotency_key=idempotency_key, status="queued", attempts=0, received_at=now(),
                         reports_written=0, queue=queue, candidate_id=candidate_id, round_id=round_id)
        try:
            with self.session() as s:
                if limits:
                    self._check_limits(s, candidate, candidate_id, limits)
                s.add(sub)
                s.flush()
                return _row(sub), True
        except IntegrityError:
            found = self.find_by_key(token_id, idempotency_key) if idempotency_key else None
            if found is None:
                raise
            return self.check_same(found, sha, exercise), False

    def _check_limits(self, s, candidate: str | None, candidate_id: str | None, limits: dict) -> None:
        """The per-candidate counts go by candidate id when there is one (two candidates who share a name share
        no limit), else by the name staff gave."""
        if not self.is_sqlite:   # SQLite's BEGIN IMMEDIATE already makes every intake wait for the last one
            s.execute(select(func.pg_advisory_xact_lock(7112)))
        t = now()
        queued = s.scalar(select(func.count()).select_from(Submission).where(Submission.status == "queued"))
        if limits.get("queue_max") and queued >= limits["queue_max"]:
            raise LimitReached("queue_full", "the grading queue is full; try again shortly", 10)
        if candidate is None and candidate_id is None:
            return
        mine = Submission.candidate_id == candidate_id if candidate_id else Submission.candidate == candidate
        cap = limits.get("max_in_flight")
        if cap and s.scalar(select(func.count()).select_from(Submission).where(
                mine, Submission.status.in_(IN_FLIGHT))) >= cap:
            raise LimitReached("in_flight", f"candidate {candidate!r} already has {cap} submissions queued or "
                                            "running", 5)
        rate = limits.get("rate_per_minute")
        if rate:
            n, oldest = s.execute(select(func.count(), func.min(Submission.received_at)).where(
                mine, Submission.received_at >= t - dt.timedelta(seconds=60))).one()
            if n >= rate:
                wait = 60 - (t - oldest).total_seconds() if oldest else 60
                raise LimitReached("rate_limit", f"candidate {candidate!r} made {n} submissions in the last minute",
                                   max(1, math.ceil(wait)))

    def find_by_key(self, token_id, key) -> dict | None:
        """The submission this token made with this Idempotency-Key, if any."""
        with self.session() as s:
            row = s.scalar(select(Submission).where(Submission.token_id == token_id,
                                                    Submission.idempotency_key == key))
            return None if row is None else _row(row)

    @staticmethod
    def check_same(row: dict, sha: str, exercise: str) -> dict:
        """``row`` if it is the same file for the same exercise; Conflict otherwise."""
        if row["sha256"] != sha or row["exercise"] != exercise:
            raise Conflict("this Idempotency-Key was used for a different submission")
        return row

    def get(self, sub_id: str) -> dict | None:
        return self._one(Submission, Submission.__table__.c.id == sub_id)

    def get_artifact(self, sub_id: str) -> bytes | None:
        with self.session() as s:
            row = s.get(Artifact, sub_id)
            return None if row is None else row.npz

    def list_submissions(self, *, exercise=None, candidate=None, verdict=None, status=None, since=None,
                         limit: int = 50, cursor: int | None = None, ids=None, candidate_id=None,
                         round_id=None) -> list[dict]:
        """``candidate``: a case-insensitive substring of the display name; ``candidate_id``: exactly that one."""
        from harness.service.store.candidates import name_matches

        q = select(Submission)
        if exercise:
            q = q.where(Submission.exercise == exercise)
        if candidate:
            q = q.where(name_matches(Submission.candidate, candidate))
        if candidate_id is not None:
            q = q.where(Submission.candidate_id == candidate_id)
        if round_id is not None:
            q = q.where(Submission.round_id == round_id)
        if verdict:
            q = q.where(Submission.verdict == verdict)
        if status:
            q = q.where(Submission.status == status)
        if since is not None:
            q = q.where(Submission.received_at >= since)
        if cursor is not None:
            q = q.where(Submission.seq < cursor)
        if ids is not None:
            q = q.where(Submission.id.in_(list(ids)))
        q = q.order_by(Submission.seq.desc()).limit(limit)
        with self.session() as s:
            return [_row(r) for r in s.scalars(q)]

    def queue_depths(self) -> dict:
        """{queue: queued rows} for every queue."""
        with self.session() as s:
            rows = s.execute(select(Submission.queue, func.count()).where(Submission.status == "queued")
                             .group_by(Submission.queue)).all()
        out = {q: 0 for q in QUEUES}
        out.update({k: v for k, v in rows})
        return out

    def verdict_counts(self) -> dict:
        """{verdict: rows} over the finished submissions (every process's gradings)."""
        with self.session() as s:
            rows = s.execute(select(Submission.verdict, func.count()).where(Submission.status == "done")
                             .group_by(Submission.verdict)).all()
        return {k: v for k, v in rows if k}

    def status_counts(self) -> dict:
        with self.session() as s:
            rows = s.execute(select(Submission.status, func.count()).group_by(Submission.status)).all()
        return {k: v for k, v in rows}

    # -- submissions: grading ----------------------------------------------------------------------------
    def due_ids(self, limit: int = 100) -> list[str]:
        with self.session() as s:
            return list(s.scalars(select(Submission.id).where(
                Submission.status == "queued",
                or_(Submission.not_before.is_(None), Submission.not_before <= now()))
                .order_by(Submission.seq).limit(limit)))

    def claim(self, sub_id: str, owner: str, lease_s: float, *, takeover: bool = False) -> dict | None:
        """queued -> running for this owner; the row (with its new attempt number) or None if not claimable.
        With ``takeover``, a running row whose lease expired (its grader died) is claimable too: the row's
        ``taken_over`` key is then True and the lease expiry is counted."""
        t = now()
        claimable = and_(Submission.status == "queued",
                         or_(Submission.not_before.is_(None), Submission.not_before <= t))
        expired = and_(Submission.status == "running", Submission.lease_until < t)
        with self.session() as s:
            before = s.execute(select(Submission.status, Submission.lease).where(Submission.id == sub_id)).first()
            if before is None:
                return None
            res = s.execute(update(Submission).where(
                Submission.id == sub_id, Submission.lease == before.lease,
                or_(claimable, expired) if takeover else claimable)
                .values(status="running", attempts=Submission.attempts + 1, lease=Submission.lease + 1,
                        started_at=t, lease_owner=owner,
                        lease_until=t + dt.timedelta(seconds=lease_s), not_before=None))
            if res.rowcount != 1:
                return None
            row = _row(s.scalar(select(Submission).where(Submission.id == sub_id)))
            row["taken_over"] = before.status == "running"
            if row["taken_over"]:
                self._bump(s, "lease_expiries")
                self._bump(s, "redeliveries")
            return row

    def renew(self, sub_id: str, fence: int, lease_s: float) -> bool:
        with self.session() as s:
            res = s.execute(update(Submission).where(Submission.id == sub_id, Submission.status == "running",
                                                     Submission.lease == fence)
                            .values(lease_until=now() + dt.timedelta(seconds=lease_s)))
            return res.rowcount == 1

    def finish(self, sub_id: str, fence: int, *, report: dict, npz: bytes | None,
               webhook: tuple[str, str] | None) -> dict | None:
        """running -> done with the report, only for the grader holding this fence (the claim's ``lease``). The artifact and the
        webhook delivery are written in the same transaction: all or nothing."""
        t = now()
        with self.session() as s:
            res = s.execute(update(Submission).where(
                Submission.id == sub_id, Submission.status == "running", Submission.lease == fence)
                .values(status="done", finished_at=t, verdict=report.get("verdict"), score=report.get("score"),
                        max_score=report.get("max_score"), report_json=json.dumps(report, allow_nan=False),
                        error_message=None, lease_owner=None, lease_until=None,
                        reports_written=Submission.reports_written + 1))
            if res.rowcount != 1:
                return None
            old = s.get(Artifact, sub_id)
            if old is not None:
                s.delete(old)
                s.flush()
            if npz is not None:
                s.add(Artifact(submission_id=sub_id, npz=npz))
            if webhook is not None:
                s.add(Webhook(submission_id=sub_id, url=webhook[0], payload=webhook[1], attempts=0, next_at=t))
            return _row(s.scalar(select(Submission).where(Submission.id == sub_id)))

    def fail(self, sub_id: str, fence: int, message: str, *, max_attempts: int, backoff_s: float,
             webhook_url_payload=None) -> str | None:
        """An infrastructure fault of the grader holding ``fence``: back to queued after a backoff, or
        infrastructure_error once ``attempts`` reaches the cap."""
        t = now()
        with self.session() as s:
            row = s.scalar(select(Submission).where(Submission.id == sub_id, Submission.status == "running",
                                                    Submission.lease == fence))
            if row is None:
                return None
            attempt = row.attempts
            if attempt < max_attempts:
                row.status, row.not_before = "queued", t + dt.timedelta(seconds=backoff_s * 2 ** (attempt - 1))
                row.enqueued_at, row.message_id = None, None     # the reconciler sends it again when due
            else:
                row.status, row.finished_at = "infrastructure_error", t
                if webhook_url_payload is not None:
                    s.add(Webhook(submission_id=sub_id, url=webhook_url_payload[0],
                                  payload=webhook_url_payload[1](row), attempts=0, next_at=t))
            row.error_message, row.lease_owner, row.lease_until = message[:4000], None, None
            return row.status

    def recover(self, *, all_running: bool, owner: str | None = None) -> list[str]:
        """running -> queued for rows whose grader is gone: every one (embedded mode, at start: the store has
        one server), or those whose lease expired or that ``owner`` (a previous life of this server, which holds
        the data-dir lock) left behind (a shared store). Expired leases are counted (``lease_expiries``)."""
        t = now()
        with self.session() as s:
            q = select(Submission).where(Submission.status == "running")
            if not all_running:
                cond = Submission.lease_until < t
                if owner is not None:
                    cond = or_(cond, Submission.lease_owner == owner)
                q = q.where(cond)
            rows = list(s.scalars(q.with_for_update(skip_locked=True) if not self.is_sqlite else q))
            expired = 0
            for r in rows:
                expired += r.lease_until is not None and r.lease_until < t
                r.status, r.lease_owner, r.lease_until = "queued", None, None
                r.enqueued_at, r.message_id = None, None
            if expired:
                self._bump(s, "lease_expiries", expired)
            return [r.id for r in rows]

    # -- the outbox --------------------------------------------------------------------------------------
    def mark_enqueued(self, sub_id: str, message_id: str | None) -> bool:
        """The broker holds a message for this queued row."""
        with self.session() as s:
            res = s.execute(update(Submission).where(Submission.id == sub_id, Submission.status == "queued")
                            .values(enqueued_at=now(), message_id=message_id))
            return res.rowcount == 1

    def outbox(self, *, grace_s: float, limit: int = 500) -> list[dict]:
        """Queued rows that are due, as {id, queue, message_id, enqueued_at}: those never handed to the broker
        (after ``grace_s``, in which the API enqueues them itself), and those handed over before (whose
        message the caller checks is still held)."""
        t = now()
        cutoff = t - dt.timedelta(seconds=grace_s)
        with self.session() as s:
            rows = s.execute(select(Submission.id, Submission.queue, Submission.message_id, Submission.enqueued_at)
                             .where(Submission.status == "queued",
                                    or_(Submission.not_before.is_(None), Submission.not_before <= t),
                                    or_(Submission.enqueued_at.isnot(None), Submission.not_before.isnot(None),
                                        Submission.received_at <= cutoff))
                             .order_by(Submission.seq).limit(limit)).all()
        return [dict(r._mapping) for r in rows]

    def clear_outbox(self, prefix: str) -> None:
        """Forget the messages whose key starts with ``prefix`` (an in-process broker that starts empty holds
        none of those it sent in a previous life)."""
        with self.session() as s:
            s.execute(update(Submission).where(Submission.status == "queued", Submission.message_id.startswith(prefix))
                      .values(enqueued_at=None, message_id=None))

    # -- shared counters ---------------------------------------------------------------------------------
    def _bump(self, s, name: str, amount: int = 1) -> None:
        res = s.execute(update(Counter).where(Counter.name == name).values(value=Counter.value + amount))
        if res.rowcount == 0:
            try:
                with s.begin_nested():
                    s.add(Counter(name=name, value=amount))
            except IntegrityError:
                s.execute(update(Counter).where(Counter.name == name).values(value=Counter.value + amount))

    def bump(self, name: str, amount: int = 1) -> None:
        with self.session() as s:
            self._bump(s, name, amount)

    def counters(self) -> dict:
        with self.session() as s:
            return {c.name: c.value for c in s.scalars(select(Counter))}

    # -- workers -----------------------------------------------------------------------------------------
    def worker_heartbeat(self, worker_id: str, **fields) -> None:
        """Insert or refresh a worker's row (host, pid, kind, queues, concurrency, busy, graded, version)."""
        t = now()
        with self.session() as s:
            w = s.get(WorkerRow, worker_id)
            if w is None:
                s.add(WorkerRow(id=worker_id, started_at=t, last_heartbeat=t, **fields))
            else:
                for k, v in fields.items():
                    setattr(w, k, v)
                w.last_heartbeat, w.stopped_at = t, None

    def worker_stopped(self, worker_id: str) -> None:
        with self.session() as s:
            s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(stopped_at=now(), busy=0))

    def list_workers(self, *, forget_after_s: float = 86400.0) -> list[dict]:
        """Workers seen in the last ``forget_after_s`` seconds, most recent heartbeat first."""
        with self.session() as s:
            return [_row(w) for w in s.scalars(select(WorkerRow).where(
                WorkerRow.last_heartbeat >= now() - dt.timedelta(seconds=forget_after_s))
                .order_by(WorkerRow.last_heartbeat.desc()))]

    def regrade(self, sub_id: str, queue: str = "bulk", *, seed: int | None = None) -> dict | None:
        """Back to queued, whatever its state but running (a running one is already being graded). The retry
        count starts again; the fence (``lease``) does not, so a grader of an earlier life can write nothing."""
        with self.session() as s:
            s.execute(update(Submission).where(Submission.id == sub_id, Submission.status != "running")
                            .values(status="queued", attempts=0, not_before=None, verdict=None, score=None,
                                    max_score=None, report_json=None, error_message=None, started_at=None,
                                    finished_at=None, reports_written=0, queue=queue, enqueued_at=None,
                                    message_id=None, **({} if seed is None else {"seed": seed})))
            row = s.scalar(select(Submission).where(Submission.id == sub_id))
            return None if row is None else _row(row)

    # -- webhooks ----------------------------------------------------------------------------------------
    def claim_webhooks(self, limit: int = 20, *, hold_s: float = 60.0) -> list[dict]:
        """Due deliveries, each claimed for this caller: its ``next_at`` moved ``hold_s`` ahead and its attempt
        counted, by a conditional update, so several senders on one store never send the same hook at once (a
        sender that dies mid-delivery leaves the hook due again after ``hold_s``: at least once)."""
        t = now()
        with self.session() as s:
            due = s.execute(select(Webhook.id, Webhook.next_at).where(
                Webhook.delivered.is_(False), Webhook.gave_up.is_(False), Webhook.next_at <= t)
                .order_by(Webhook.id).limit(limit)).all()
        out = []
        for hook_id, next_at in due:
            with self.session() as s:
                res = s.execute(update(Webhook).where(Webhook.id == hook_id, Webhook.next_at == next_at,
                                                      Webhook.delivered.is_(False), Webhook.gave_up.is_(False))
                                .values(next_at=t + dt.timedelta(seconds=hold_s), attempts=Webhook.attempts + 1))
                if res.rowcount == 1:
                    out.append(_row(s.get(Webhook, hook_id)))
        return out

    def webhook_result(self, hook: dict, *, ok: bool, error: str | None, max_attempts: int,
                       backoff_s: float) -> None:
        """Record the delivery of a hook claimed by :meth:`claim_webhooks` (its attempt is already counted)."""
        n = hook["attempts"]
        if ok:
            values = dict(delivered=True, last_error=None)
        elif n >= max_attempts:
            values = dict(gave_up=True, last_error=(error or "")[:1000])
        else:
            values = dict(last_error=(error or "")[:1000],
                          next_at=now() + dt.timedelta(seconds=backoff_s * 2 ** (n - 1)))
        with self.session() as s:
            s.execute(update(Webhook).where(Webhook.id == hook["id"], Webhook.attempts == n,
                                            Webhook.delivered.is_(False)).values(**values))

    def webhooks_for(self, sub_id: str) -> list[dict]:
        with self.session() as s:
            return [_row(w) for w in s.scalars(select(Webhook).where(Webhook.submission_id == sub_id))]


def create_all_for_tests(engine) -> None:  # pragma: no cover - migrations are the normal path
    Base.metadata.create_all(engine)
