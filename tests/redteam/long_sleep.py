"""Sleeps for a day inside the call (no CPU used, so a CPU-time limit alone would never fire)."""

import time


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    time.sleep(86400)
