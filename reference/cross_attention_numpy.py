"""Reference solution: multi-head cross-attention, NumPy track."""

import numpy as np


def cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None):
    """Queries from X (b, s_q, d), keys and values from Y (b, s_k, d); W* (d, d);
    mask broadcastable to (b, h, s_q, s_k), True = masked. Returns (b, s_q, d)."""
    b, s_q, d = X.shape
    s_k = Y.shape[1]
    d_k = d // h
    Q = (X @ Wq).reshape(b, s_q, h, d_k).transpose(0, 2, 1, 3)    # (b, h, s_q, d_k)
    K = (Y @ Wk).reshape(b, s_k, h, d_k).transpose(0, 2, 1, 3)    # (b, h, s_k, d_k)
    V = (Y @ Wv).reshape(b, s_k, h, d_k).transpose(0, 2, 1, 3)    # (b, h, s_k, d_k)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)  # (b, h, s_q, s_k)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)  # (b, h, s_q, s_k)
        empty = mask.all(axis=-1, keepdims=True)                    # (b, h, s_q, 1) rows with no key
        scores = np.where(mask, -np.inf, scores)
        scores = np.where(empty, 0, scores)                         # keep those rows finite
    scores = scores - scores.max(axis=-1, keepdims=True)            # (b, h, s_q, s_k) stable softmax
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)         # (b, h, s_q, s_k)
    if mask is not None:
        weights = np.where(mask, 0, weights)                        # fully-masked rows -> zero context
    context = weights @ V                                           # (b, h, s_q, d_k)
    context = context.transpose(0, 2, 1, 3).reshape(b, s_q, d)      # (b, s_q, d)
    return (context @ Wo).astype(X.dtype, copy=False)               # (b, s_q, d)
