"""Shape-branching mutant: GQA that, for h > 8, expands the key/value groups with tile (head i reads group i % g)
instead of repeat. Right for h <= 8, and for g == 1 or g == h at any h."""

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    K = (X @ Wk).reshape(b, s, g, d_k).transpose(0, 2, 1, 3)
    V = (X @ Wv).reshape(b, s, g, d_k).transpose(0, 2, 1, 3)
    if h > 8:                                   # "many heads: tile is cheaper" (it is not the same order)
        K, V = np.tile(K, (1, h // g, 1, 1)), np.tile(V, (1, h // g, 1, 1))
    else:
        K, V = np.repeat(K, h // g, axis=1), np.repeat(V, h // g, axis=1)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
        empty = mask.all(axis=-1, keepdims=True)
        scores = np.where(empty, 0, np.where(mask, -np.inf, scores))
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    if mask is not None:
        w = np.where(mask, 0, w)
    ctx = (w @ V).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False)
