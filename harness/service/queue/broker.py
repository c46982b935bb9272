"""The message broker: Dramatiq's Redis broker (``redis://``), its RabbitMQ broker (``amqp://``, documented
alternative) or, with no URL, its in-process stub broker (the embedded mode of `grade serve`).

Messages carry only a submission id; the store stays the truth. Besides sending, the reconciler needs two
answers from the broker: does it still hold the message it was given for a row (after a Redis restart it does
not), and how deep is each queue."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("grader.broker")

QUEUES = ("interactive", "bulk", "ci")             # highest priority first
PRIORITY = {"interactive": 0, "bulk": 10, "ci": 20}  # Dramatiq runs lower numbers first
NAMESPACE = "attn-grader"


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def redact(url: str | None) -> str:
    """The URL without its password, for logs and pages."""
    if not url:
        return "in-process"
    from urllib.parse import urlsplit, urlunsplit

    p = urlsplit(url)
    if p.password:
        netloc = f"{p.username or ''}:***@{p.hostname}" + (f":{p.port}" if p.port else "")
        return urlunsplit((p.scheme, netloc, p.path, p.query, p.fragment))
    return url


class Broker:
    """A Dramatiq broker plus what the reconciler asks of it."""

    def __init__(self, url: str | None, settings, *, tag: str = "local"):
        import dramatiq
        from dramatiq.middleware import AgeLimit, CurrentMessage, Retries, TimeLimit

        self.url = url
        self.tag = tag     # the in-process broker's keys name their process: another one's it cannot judge
        # our own watchdog (submission_timeout_s) fires first; Dramatiq's time limit is the backstop
        time_limit_ms = int((settings.submission_timeout_s + 120) * 1000)
        middleware = [AgeLimit(), TimeLimit(time_limit=time_limit_ms), CurrentMessage(),
                      Retries(max_retries=_env_int("GRADER_BROKER_MAX_RETRIES", 8), min_backoff=1000,
                              max_backoff=60000)]
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        if not url:
            from dramatiq.brokers.stub import StubBroker

            self.kind = "stub"
            self.dramatiq = StubBroker(middleware=middleware)
        elif url.startswith(("redis://", "rediss://", "unix://")):
            from dramatiq.brokers.redis import RedisBroker

            self.kind = "redis"
            # a worker whose heartbeat is older than the lease is dead: its unacked messages go back to the queue
            self.dramatiq = RedisBroker(url=url, namespace=NAMESPACE, middleware=middleware,
                                        heartbeat_timeout=int(settings.lease_s * 1000),
                                        maintenance_chance=_env_int("GRADER_BROKER_MAINTENANCE_CHANCE", 10000),
                                        socket_timeout=10, socket_connect_timeout=5, health_check_interval=15)
        elif url.startswith(("amqp://", "amqps://")):
            from dramatiq.brokers.rabbitmq import RabbitmqBroker  # needs `pip install pika`

            self.kind = "rabbitmq"
            self.dramatiq = RabbitmqBroker(url=url, middleware=middleware)
        else:
            raise ValueError(f"unsupported broker URL {redact(url)!r}: use redis://HOST:PORT/DB (or amqp://...)")
        self._dramatiq_module = dramatiq
        for q in QUEUES:
            self.dramatiq.declare_queue(q)

    # -- sending -----------------------------------------------------------------------------------------
    def send(self, actor, submission_id: str) -> str:
        """Enqueue a message for ``submission_id`` on the actor's queue; the key that identifies it in the
        broker (what :meth:`holds` takes)."""
        message = actor.message(submission_id)
        if self.kind == "stub":
            with self._held_lock:
                self._held.add(message.message_id)
            try:
                self.dramatiq.enqueue(message)
            except Exception:
                self.release(message.message_id)
                raise
            return f"{self.tag}/{message.message_id}"
        sent = self.dramatiq.enqueue(message)
        return sent.options.get("redis_message_id") or sent.message_id

    @staticmethod
    def key_of(message) -> str | None:
        if message is None:
            return None
        return message.options.get("redis_message_id") or message.message_id

    def release(self, key: str | None) -> None:
        """The stub broker's bookkeeping: the message was handed to an actor."""
        if key and self.kind == "stub":
            with self._held_lock:
                self._held.discard(key)

    # -- what the reconciler asks ------------------------------------------------------------------------
    def holds(self, queue: str, key: str | None) -> bool | None:
        """Does the broker still hold this message (waiting, delayed or delivered but not acknowledged)?
        None when the broker cannot tell (RabbitMQ). Raises when the broker is unreachable."""
        if not key:
            return False
        if self.kind == "stub":
            tag, _, mid = key.rpartition("/")
            if tag != self.tag:
                return None        # sent by another server on a shared store: only time tells
            with self._held_lock:
                return mid in self._held
        if self.kind == "redis":
            client = self.dramatiq.client
            return bool(client.hexists(f"{NAMESPACE}:{queue}.msgs", key)
                        or client.hexists(f"{NAMESPACE}:{queue}.DQ.msgs", key))
        return None

    def depths(self) -> dict[str, int] | None:
        """Messages waiting per queue, or None when the broker cannot tell or is unreachable."""
        try:
            if self.kind == "stub":
                return {q: self.dramatiq.queues[q].qsize() for q in QUEUES}
            if self.kind == "redis":
                client = self.dramatiq.client
                return {q: int(client.llen(f"{NAMESPACE}:{q}")) for q in QUEUES}
        except Exception:
            return None
        return None

    def ping(self) -> bool:
        try:
            if self.kind == "redis":
                return bool(self.dramatiq.client.ping())
            return True
        except Exception:
            return False

    def close(self) -> None:
        try:
            self.dramatiq.close()
        except Exception:  # pragma: no cover
            pass
