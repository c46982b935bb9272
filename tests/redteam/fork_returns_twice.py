"""Forks inside every call and lets BOTH processes return: two answers race onto the protocol pipe and two
processes compete for the host's next requests."""

import ctypes
import os

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    pid = os.fork()
    if pid == 0:
        try:
            ctypes.CDLL(None).prctl(15, b"@@MARKER@@", 0, 0, 0)
        except Exception:
            pass
    return np.zeros_like(X) + (1.0 if pid == 0 else 0.0)
