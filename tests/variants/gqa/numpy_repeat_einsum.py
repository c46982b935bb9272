"""Correct variant (gqa, NumPy): expand K/V to h heads with np.repeat (group i // (h // g)), then einsum."""

import math

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    b, s, d = X.shape
    dk = d // h
    Q = (X @ Wq).reshape(b, s, h, dk)
    K = np.repeat((X @ Wk).reshape(b, s, g, dk), h // g, axis=2)      # (b, s, h, dk)
    V = np.repeat((X @ Wv).reshape(b, s, g, dk), h // g, axis=2)      # (b, s, h, dk)
    scores = np.einsum("bqhe,bkhe->bhqk", Q, K) / math.sqrt(dk)
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), -np.inf, scores)
    row_max = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0))
    denom = e.sum(axis=-1, keepdims=True)
    p = e / np.where(denom > 0, denom, 1.0)
    ctx = np.einsum("bhqk,bkhe->bqhe", p, V).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False)
