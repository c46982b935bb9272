"""Issue 28 #1: a webhook goes only to public addresses (or to networks on the allow-list), checked on the
addresses the host name resolves to at delivery, and the connection is made to the address that was checked."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.service import callbacks
from harness.service.webhooks import WebhookSender

REFUSED = ["169.254.169.254", "127.0.0.1", "127.8.9.10", "::1", "10.0.0.5", "172.16.3.4", "192.168.1.1",
           "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "239.255.255.250", "ff02::1", "fe80::1", "fc00::1",
           "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.5",
           "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "2002:a9fe:a9fe::", "240.0.0.1", "255.255.255.255"]


@pytest.mark.parametrize("address", REFUSED)
def test_every_internal_address_is_refused(address):
    assert callbacks.refusal(address) is not None
    host = f"[{address}]" if ":" in address else address
    assert callbacks.literal_refusal(f"http://{host}:6379/latest/meta-data/") is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    assert callbacks.refusal(address) is None


def test_the_allow_list_lets_an_in_house_network_through():
    allow = callbacks.parse_allow("10.1.2.0/24, fd12::/64")
    assert callbacks.refusal("10.1.2.7", allow) is None and callbacks.refusal("fd12::5", allow) is None
    assert callbacks.refusal("10.1.3.7", allow) is not None
    with pytest.raises(ValueError):
        callbacks.parse_allow("10.1.2.0/24,not-a-network")


class _Receiver:
    def __enter__(self):
        self.hits = []
        hits = self.hits

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                hits.append((self.headers["Host"], self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a):
                pass
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


def _sender(tmp_path: Path, allow: str = "") -> WebhookSender:
    settings = SimpleNamespace(data_dir=tmp_path, webhook_allow=callbacks.parse_allow(allow),
                               webhook_attempts=6, webhook_backoff_s=1.0)
    return WebhookSender(None, settings)


def _hook(url: str) -> dict:
    return {"id": 1, "url": url, "payload": '{"event": "submission.finished"}', "attempts": 1}


def test_delivery_refuses_a_name_resolving_inside_and_delivers_to_an_allowed_one(tmp_path, monkeypatch):
    with _Receiver() as rx:
        # a loopback receiver is refused (final: never retried), through a literal or a name...
        for url in (f"http://127.0.0.1:{rx.port}/h", f"http://localhost:{rx.port}/h"):
            ok, err, final = _sender(tmp_path).deliver(_hook(url))
            assert not ok and final and "loopback" in err
        assert rx.hits == []
        # ...and delivered once the allow-list names its network
        ok, err, final = _sender(tmp_path, "127.0.0.0/8").deliver(_hook(f"http://localhost:{rx.port}/h"))
        assert ok and err is None and len(rx.hits) == 1


def test_the_connection_goes_to_the_checked_address_with_no_second_lookup(tmp_path, monkeypatch):
    """A rebinding resolver answers a public address first and loopback after: the check sees the first
    answer, and the connection must use it too (so here it goes nowhere near the receiver on loopback)."""
    real = socket.getaddrinfo
    answers = {"rebind.test": ["127.0.0.1"]}
    calls = []

    def fake(host, port, *a, **k):
        if host in answers:
            calls.append(host)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host][0], port))]
        return real(host, port, *a, **k)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with _Receiver() as rx:
        ok, err, final = _sender(tmp_path, "127.0.0.1/32").deliver(_hook(f"http://rebind.test:{rx.port}/h"))
        assert ok, err
        assert calls == ["rebind.test"]                      # resolved once, at the check
        assert rx.hits[0][0] == f"rebind.test:{rx.port}"      # the URL's host in the Host header
        answers["rebind.test"] = ["10.9.9.9"]
        ok, err, final = _sender(tmp_path, "127.0.0.1/32").deliver(_hook(f"http://rebind.test:{rx.port}/h"))
        assert not ok and final and "10.9.9.9" in err and len(rx.hits) == 1
