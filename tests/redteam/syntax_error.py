"""A file that does not parse."""

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None:
    return np.zeros_like(X)
