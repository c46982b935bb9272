"""Starts threads until the system refuses, then returns garbage; the threads linger in the worker."""

import threading
import time

import numpy as np

THREADS = []


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    for _ in range(5000):
        try:
            t = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
            t.start()
        except (RuntimeError, MemoryError, OSError):
            break
        THREADS.append(t)
    return np.zeros_like(X)
