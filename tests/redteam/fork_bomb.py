"""A fork bomb, bounded at 2**8 processes so the local backend does not take the test machine down (under
Docker the --pids-limit stops it first). Every child tags itself (comm = @@MARKER@@) and sleeps forever;
none may survive the run."""

import ctypes
import os
import time


def _tag():
    try:
        ctypes.CDLL(None).prctl(15, b"@@MARKER@@", 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    child = False
    for _ in range(8):
        try:
            if os.fork() == 0:
                child = True
                _tag()
        except OSError:
            break
    if child:
        while True:
            time.sleep(1)
    while True:
        time.sleep(0.05)
