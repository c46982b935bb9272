"""Service settings: where the store lives and how the pool and the limits behave.

Every command that touches the store (``serve``, ``tokens``, later ``worker``) takes the same ``--data-dir`` /
``--db`` options, read from ``GRADER_DATA_DIR`` / ``GRADER_DATABASE_URL`` when not given.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from harness.service.callbacks import parse_allow

DATA_DIR_ENV = "GRADER_DATA_DIR"
DATABASE_URL_ENV = "GRADER_DATABASE_URL"
BROKER_URL_ENV = "GRADER_BROKER_URL"


def default_data_dir() -> Path:
    """A folder the user owns: $XDG_DATA_HOME/attention-grader, else ~/.local/share/attention-grader."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "attention-grader"


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


@dataclasses.dataclass
class Settings:
    data_dir: Path
    database_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2                  # grading processes in the in-process pool
    sandbox: str = "auto"             # auto | local | docker (GRADER_SANDBOX)
    queue_max: int = 500              # queued submissions before POST answers 503
    rate_per_minute: int = 30         # submissions per candidate per minute before 429
    max_in_flight: int = 5            # queued + running per candidate before 429
    max_attempts: int = 3             # grading attempts when the grader itself fails
    retry_backoff_s: float = 2.0      # first retry delay after an infrastructure error (doubles)
    submission_timeout_s: float = 900.0   # watchdog for one grading (the engine bounds itself first)
    webhook_attempts: int = 6
    webhook_backoff_s: float = 1.0
    webhook_allow: tuple = ()         # networks webhooks may reach though not public (GRADER_WEBHOOK_ALLOW)
    secure_cookies: bool = False      # set the Secure flag (behind https)
    broker_url: str | None = None     # redis://... (or amqp://...): grading in `grade worker` processes
    lease_s: float = 60.0             # a running row's lease, renewed every lease_s / 4 while it is graded
    heartbeat_s: float = 5.0          # how often a worker writes its heartbeat row
    reconcile_s: float = 5.0          # how often `grade serve` reconciles the store with the broker
    outbox_grace_s: float = 5.0       # a queued row not handed to the broker after this is enqueued by the reconciler
    public_url: str | None = None     # the server's address in invitation links (default: the request's)
    reenqueue_after_s: float = 300.0  # brokers that cannot say whether they hold a message: send again after this

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @classmethod
    def resolve(cls, data_dir: str | os.PathLike | None = None, db: str | None = None, **overrides) -> "Settings":
        data = Path(data_dir or os.environ.get(DATA_DIR_ENV) or default_data_dir()).expanduser().resolve()
        url = db or os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{data / 'grader.db'}"
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://"):]
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
        kw = dict(
            workers=_env_int("GRADER_WORKERS", 2), sandbox=os.environ.get("GRADER_SANDBOX", "auto"),
            queue_max=_env_int("GRADER_QUEUE_MAX", 500), rate_per_minute=_env_int("GRADER_RATE_PER_MINUTE", 30),
            max_in_flight=_env_int("GRADER_MAX_IN_FLIGHT", 5), max_attempts=_env_int("GRADER_MAX_ATTEMPTS", 3),
            retry_backoff_s=_env_float("GRADER_RETRY_BACKOFF_S", 2.0),
            webhook_attempts=_env_int("GRADER_WEBHOOK_ATTEMPTS", 6),
            webhook_backoff_s=_env_float("GRADER_WEBHOOK_BACKOFF_S", 1.0),
            webhook_allow=parse_allow(os.environ.get("GRADER_WEBHOOK_ALLOW")),
            submission_timeout_s=_env_float("GRADER_SUBMISSION_TIMEOUT_S", 900.0),
            secure_cookies=os.environ.get("GRADER_SECURE_COOKIES", "") not in ("", "0", "false", "no"),
            broker_url=os.environ.get(BROKER_URL_ENV) or None, lease_s=_env_float("GRADER_LEASE_S", 60.0),
            heartbeat_s=_env_float("GRADER_HEARTBEAT_S", 5.0), reconcile_s=_env_float("GRADER_RECONCILE_S", 5.0),
            outbox_grace_s=_env_float("GRADER_OUTBOX_GRACE_S", 5.0),
            reenqueue_after_s=_env_float("GRADER_REENQUEUE_AFTER_S", 300.0),
            public_url=os.environ.get("GRADER_PUBLIC_URL") or None,
        )
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(data_dir=data, database_url=url, **kw)

    def ensure_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
