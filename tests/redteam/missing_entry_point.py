"""Defines the wrong name: no `mha` at all."""

import numpy as np


def multi_head_attention(X, Wq, Wk, Wv, Wo, h, mask=None):
    return np.zeros_like(X)
