"""Correct variant (mha, NumPy): compute in float64, -1e9 fill, explicit zeroing of fully-masked rows,
cast back to the input dtype at the end."""

import numpy as np

NEG = -1e9


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    dtype = X.dtype
    X, Wq, Wk, Wv, Wo = (np.asarray(a, dtype=np.float64) for a in (X, Wq, Wk, Wv, Wo))
    b, s, d = X.shape
    dk = d // h

    def split(t):
        return t.reshape(b, s, h, dk).swapaxes(1, 2)    # (b, h, s, dk)

    q, k, v = split(X @ Wq), split(X @ Wk), split(X @ Wv)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(dk)       # (b, h, s, s)
    if mask is None:
        m = np.zeros(scores.shape, dtype=bool)
    else:
        m = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    scores = np.where(m, NEG, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * ~m                                           # exactly zero weight on masked keys
    w = w * (~m.all(axis=-1, keepdims=True))             # fully-masked rows -> zero context
    ctx = (w @ v).swapaxes(1, 2).reshape(b, s, d)
    return (ctx @ Wo).astype(dtype)
