"""Correct variant (cross_attention, NumPy): float64 inside, batched heads as (b*h) matrices, explicit
zeroing of fully-masked rows, cast back to the input dtype."""

import numpy as np


def cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None):
    dtype = X.dtype
    X, Y, Wq, Wk, Wv, Wo = (a.astype(np.float64) for a in (X, Y, Wq, Wk, Wv, Wo))
    b, s_q, d = X.shape
    s_k = Y.shape[1]
    dk = d // h

    def heads(t, n):                                              # (b, n, d) -> (b*h, n, dk)
        return t.reshape(b, n, h, dk).transpose(0, 2, 1, 3).reshape(b * h, n, dk)

    q, k, v = heads(X @ Wq, s_q), heads(Y @ Wk, s_k), heads(Y @ Wv, s_k)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(dk)              # (b*h, s_q, s_k)
    if mask is not None:
        m = np.broadcast_to(mask, (b, h, s_q, s_k)).reshape(b * h, s_q, s_k)
        empty = m.all(axis=-1, keepdims=True)
        scores = np.where(m, -np.inf, scores)
        scores = np.where(empty, 0.0, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    if mask is not None:
        p = p * ~empty
    ctx = (p @ v).reshape(b, h, s_q, dk).transpose(0, 2, 1, 3).reshape(b, s_q, d)
    return (ctx @ Wo).astype(dtype)
