"""Reference solution: masked multi-head attention, NumPy track."""

import numpy as np


def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    """Masked multi-head self-attention. X (b, s, d); W* (d, d); mask broadcastable to (b, h, s, s), True = masked."""
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)      # (b, h, s, d_k)
    K = (X @ Wk).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)      # (b, h, s, d_k)
    V = (X @ Wv).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)      # (b, h, s, d_k)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)  # (b, h, s, s)
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)  # (b, h, s, s)
    empty = mask.all(axis=-1, keepdims=True)                        # (b, h, s, 1) rows with no key left
    scores = np.where(mask, -np.inf, scores)                        # (b, h, s, s)
    scores = np.where(empty, 0, scores)                             # keep fully-masked rows finite
    scores = scores - scores.max(axis=-1, keepdims=True)            # (b, h, s, s) stable softmax
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)         # (b, h, s, s)
    weights = np.where(mask, 0, weights)                            # fully-masked rows -> zero context
    context = weights @ V                                           # (b, h, s, d_k)
    context = context.transpose(0, 2, 1, 3).reshape(b, s, d)        # (b, s, d)
    return (context @ Wo).astype(X.dtype, copy=False)               # (b, s, d)
