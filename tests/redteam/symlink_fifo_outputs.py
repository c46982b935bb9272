"""Plants symlinks (to /etc/shadow, /dev/zero) and FIFOs under the names a file-based grader might read results
from. Our protocol never reads files, so the run must finish normally (no hang on a FIFO, no leak)."""

import os

import numpy as np


def _plant():
    for name, target in (("out.npy", "/etc/shadow"), ("result.npy", "/dev/zero"), ("report.json", "/etc/passwd")):
        try:
            os.symlink(target, name)
        except OSError:
            pass
    for name in ("output.npy", "results.json", "answer.npy"):
        try:
            os.mkfifo(name)
        except OSError:
            pass


_plant()


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    _plant()
    return np.zeros_like(X)
