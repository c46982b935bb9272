"""Correct variant (masked_mha, NumPy): float64 inside, finfo.min fill, explicit zeroing of fully-masked rows."""

import numpy as np


def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    out_dtype = X.dtype
    f = lambda a: np.array(a, dtype=np.float64)  # noqa: E731  (copies: never touches the caller's arrays)
    X, Wq, Wk, Wv, Wo = map(f, (X, Wq, Wk, Wv, Wo))
    b, s, d = X.shape
    dk = d // h
    split = lambda t: t.reshape(b, s, h, dk).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(X @ Wq), split(X @ Wk), split(X @ Wv)          # (b, h, s, dk)
    scores = np.matmul(q, k.transpose(0, 1, 3, 2)) / np.sqrt(dk)
    m = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    scores = np.where(m, np.finfo(np.float64).min, scores)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    w[m] = 0.0
    w[np.broadcast_to(m.all(axis=-1, keepdims=True), w.shape)] = 0.0
    ctx = np.matmul(w, v).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(out_dtype)
