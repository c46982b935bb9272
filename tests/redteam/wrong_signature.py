"""`mha` with the wrong signature: the grader's positional call raises TypeError."""

import numpy as np


def mha(X, W):
    return np.zeros_like(X)
