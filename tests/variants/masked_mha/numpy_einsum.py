"""Correct variant (masked_mha, NumPy): einsum, -inf fill, fully-masked rows handled by a safe denominator."""

import math

import numpy as np


def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    b, s, d = X.shape
    dk = d // h
    Q = np.einsum("bsd,de->bse", X, Wq).reshape(b, s, h, dk)
    K = np.einsum("bsd,de->bse", X, Wk).reshape(b, s, h, dk)
    V = np.einsum("bsd,de->bse", X, Wv).reshape(b, s, h, dk)
    scores = np.einsum("bqhe,bkhe->bhqk", Q, K) / math.sqrt(dk)       # (b, h, s, s)
    m = np.broadcast_to(mask, scores.shape)
    scores = np.where(m, -np.inf, scores)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(scores - row_max)
    denom = e.sum(axis=-1, keepdims=True)
    p = e / np.where(denom > 0, denom, 1.0)
    ctx = np.einsum("bhqk,bkhe->bqhe", p, V).reshape(b, s, d)
    return np.einsum("bsd,de->bse", ctx, Wo).astype(X.dtype, copy=False)
