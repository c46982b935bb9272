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
import urllib.error
import urllib.request

log = logging.getLogger("grader.webhooks")


def sign(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):  # a redirect is a failed delivery, never followed
        return None


class WebhookSender:
    def __init__(self, store, settings, metrics=None, *, poll_s: float = 0.5, timeout_s: float = 5.0):
        self.store, self.settings, self.metrics = store, settings, metrics
        self.poll_s, self.timeout_s = poll_s, timeout_s
        self.secret = store.server_secret("webhook")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._opener = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def deliver(self, hook: dict) -> tuple[bool, str | None]:
        body = hook["payload"].encode()
        ts = str(int(time.time()))
        req = urllib.request.Request(hook["url"], data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": "attention-grader-webhook/1",
            "X-Grader-Timestamp": ts, "X-Grader-Signature": sign(self.secret, ts, body),
            "X-Grader-Delivery": str(hook["id"])})
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                ok = 200 <= resp.status < 300
                return ok, None if ok else f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            return False, f"HTTP {exc.code}"
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"[:300]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                hooks = self.store.due_webhooks()
            except Exception:
                log.exception("webhooks: could not read deliveries")
                hooks = []
            for hook in hooks:
                if self._stop.is_set():
                    return
                ok, err = self.deliver(hook)
                if self.metrics is not None:
                    self.metrics.inc("grader_webhook_deliveries_total", outcome="ok" if ok else "failed")
                try:
                    self.store.webhook_result(hook["id"], ok=ok, error=err,
                                              max_attempts=self.settings.webhook_attempts,
                                              backoff_s=self.settings.webhook_backoff_s)
                except Exception:
                    log.exception("webhooks: could not record a delivery")
            self._stop.wait(self.poll_s)
