"""Reference solution: grouped-query attention, NumPy track."""

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    """Grouped-query self-attention: h query heads share g key/value groups (query head i reads group
    i // (h // g)). X (b, s, d); Wq, Wo (d, d); Wk, Wv (d, g*d_k); mask broadcastable to (b, h, s, s)."""
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)      # (b, h, s, d_k)
    K = (X @ Wk).reshape(b, s, g, d_k).transpose(0, 2, 1, 3)      # (b, g, s, d_k)
    V = (X @ Wv).reshape(b, s, g, d_k).transpose(0, 2, 1, 3)      # (b, g, s, d_k)
    K = np.repeat(K, h // g, axis=1)                                # (b, h, s, d_k) group i // (h//g)
    V = np.repeat(V, h // g, axis=1)                                # (b, h, s, d_k)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)  # (b, h, s, s)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)  # (b, h, s, s)
        empty = mask.all(axis=-1, keepdims=True)                    # (b, h, s, 1) rows with no key
        scores = np.where(mask, -np.inf, scores)
        scores = np.where(empty, 0, scores)                         # keep those rows finite
    scores = scores - scores.max(axis=-1, keepdims=True)            # (b, h, s, s) stable softmax
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)         # (b, h, s, s)
    if mask is not None:
        weights = np.where(mask, 0, weights)                        # fully-masked rows -> zero context
    context = weights @ V                                           # (b, h, s, d_k)
    context = context.transpose(0, 2, 1, 3).reshape(b, s, d)        # (b, s, d)
    return (context @ Wo).astype(X.dtype, copy=False)               # (b, s, d)
