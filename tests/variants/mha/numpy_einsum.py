"""Correct variant (mha, NumPy): einsum for every contraction, heads as an explicit axis."""

import math

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    dk = d // h
    Q = np.einsum("bsd,de->bse", X, Wq).reshape(b, s, h, dk)
    K = np.einsum("bsd,de->bse", X, Wk).reshape(b, s, h, dk)
    V = np.einsum("bsd,de->bse", X, Wv).reshape(b, s, h, dk)
    scores = np.einsum("bqhe,bkhe->bhqk", Q, K) / math.sqrt(dk)
    if mask is not None:
        m = np.broadcast_to(mask, scores.shape)
        scores = np.where(m, -np.inf, scores)
        row_max = scores.max(axis=-1, keepdims=True)
        row_max = np.where(np.isneginf(row_max), 0.0, row_max)
        e = np.exp(scores - row_max)                  # masked entries are exactly 0
        denom = e.sum(axis=-1, keepdims=True)
        p = e / np.where(denom == 0, 1.0, denom)      # fully-masked rows stay all-zero
    else:
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bkhe->bqhe", p, V).reshape(b, s, d)
    return np.einsum("bsd,de->bse", ctx, Wo).astype(X.dtype, copy=False)
