"""Correct variant (cross_attention, NumPy): einsum, -inf fill, safe denominator for fully-masked rows."""

import math

import numpy as np


def cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None):
    b, s_q, d = X.shape
    s_k = Y.shape[1]
    dk = d // h
    Q = np.einsum("bqd,de->bqe", X, Wq).reshape(b, s_q, h, dk)
    K = np.einsum("bkd,de->bke", Y, Wk).reshape(b, s_k, h, dk)
    V = np.einsum("bkd,de->bke", Y, Wv).reshape(b, s_k, h, dk)
    scores = np.einsum("bqhe,bkhe->bhqk", Q, K) / math.sqrt(dk)      # (b, h, s_q, s_k)
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), -np.inf, scores)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(scores - row_max)
    denom = e.sum(axis=-1, keepdims=True)
    p = e / np.where(denom > 0, denom, 1.0)
    ctx = np.einsum("bhqk,bkhe->bqhe", p, V).reshape(b, s_q, d)
    return np.einsum("bqd,de->bqe", ctx, Wo).astype(X.dtype, copy=False)
