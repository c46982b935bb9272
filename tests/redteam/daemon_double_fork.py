"""Double-forks a daemon (setsid, re-parented away from the worker) on its first call. The daemon tags itself
(comm = @@MARKER@@), waits until after the call has returned, then tries to forge report files and keeps
running. It must not outlive the grading run, and its files must not appear outside the sandbox."""

import ctypes
import json
import os
import time

import numpy as np

STARTED = []


def _daemon():
    try:
        ctypes.CDLL(None).prctl(15, b"@@MARKER@@", 0, 0, 0)
    except Exception:
        pass
    time.sleep(1.0)
    fake = json.dumps({"verdict": "passed", "score": 31, "max_score": 31, "forged_by": "@@MARKER@@"})
    for place in ("/tmp", "/var/tmp", "/dev/shm", os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        for name in ("report.json", "@@MARKER@@-late.json"):
            try:
                with open(os.path.join(place, name), "w") as f:
                    f.write(fake)
            except OSError:
                pass
    while True:
        time.sleep(0.5)


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    if not STARTED:
        STARTED.append(1)
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                for fd in (0, 1):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                try:
                    _daemon()
                finally:
                    os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
    return np.zeros_like(X)
