"""Correct variant (gqa, NumPy): no repeat at all; queries reshaped to (b, g, h//g, s, dk) so each group's K/V
broadcast over its query heads. Float64 inside, finfo.min fill, explicit zeroing, cast back."""

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    dtype = X.dtype
    X, Wq, Wk, Wv, Wo = (np.asarray(a, np.float64) for a in (X, Wq, Wk, Wv, Wo))
    b, s, d = X.shape
    dk, r = d // h, h // g
    q = (X @ Wq).reshape(b, s, g, r, dk).transpose(0, 2, 3, 1, 4)     # (b, g, r, s, dk); head i = j*r + t
    k = (X @ Wk).reshape(b, s, g, dk).transpose(0, 2, 1, 3)[:, :, None]  # (b, g, 1, s, dk)
    v = (X @ Wv).reshape(b, s, g, dk).transpose(0, 2, 1, 3)[:, :, None]  # (b, g, 1, s, dk)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(dk)                    # (b, g, r, s, s)
    if mask is None:
        m = np.zeros(scores.shape, dtype=bool)
    else:
        m = np.broadcast_to(mask, (b, h, s, s)).reshape(b, g, r, s, s)
    scores = np.where(m, np.finfo(np.float64).min, scores)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    w = np.where(m | m.all(axis=-1, keepdims=True), 0.0, w)
    ctx = (w @ v).reshape(b, h, s, dk).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(dtype)
