"""Webhook delivery: on completion the pool writes a delivery row (in the same transaction as the report);
this thread POSTs it to the callback URL, signed, retried with exponential backoff, never blocking grading.

Signature: ``X-Grader-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`` with
``X-Grader-Timestamp: <unix seconds>``; the secret is per server (``grade tokens webhook-secret`` prints it)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time

from harness.service import callbacks
from harness.service.keys import server_key

log = logging.getLogger("grader.webhooks")


def sign(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class WebhookSender:
    def __init__(self, store, settings, metrics=None, *, poll_s: float = 0.5, timeout_s: float = 5.0):
        self.store, self.settings, self.metrics = store, settings, metrics
        self.poll_s, self.timeout_s = poll_s, timeout_s
        self.secret = server_key(settings.data_dir, "webhook")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def deliver(self, hook: dict) -> tuple[bool, str | None, bool]:
        """(delivered, error, final): a refused destination is final (never retried); no proxy, no redirect
        followed (a 3xx is a failed delivery)."""
        body = hook["payload"].encode()
        ts = str(int(time.time()))
        headers = {"Content-Type": "application/json", "User-Agent": "attention-grader-webhook/1",
                   "X-Grader-Timestamp": ts, "X-Grader-Signature": sign(self.secret, ts, body),
                   "X-Grader-Delivery": str(hook["id"]), "X-Grader-Attempt": str(hook["attempts"])}
        try:
            status = callbacks.post(hook["url"], body, headers, timeout=self.timeout_s,
                                    allow=self.settings.webhook_allow)
        except callbacks.Refused as exc:
            log.warning("webhook %s refused: %s", hook["id"], exc)
            return False, f"refused: {exc}", True
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"[:300], False
        ok = 200 <= status < 300
        return ok, None if ok else f"HTTP {status}", False

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                hooks = self.store.claim_webhooks(hold_s=max(60.0, 4 * self.timeout_s))
            except Exception:
                log.exception("webhooks: could not read deliveries")
                hooks = []
            for hook in hooks:
                if self._stop.is_set():
                    return
                ok, err, final = self.deliver(hook)
                if self.metrics is not None:
                    self.metrics.inc("grader_webhook_deliveries_total", outcome="ok" if ok else "failed")
                try:
                    self.store.webhook_result(hook, ok=ok, error=err,
                                              max_attempts=hook["attempts"] if final else
                                              self.settings.webhook_attempts,
                                              backoff_s=self.settings.webhook_backoff_s)
                except Exception:
                    log.exception("webhooks: could not record a delivery")
            self._stop.wait(self.poll_s)
