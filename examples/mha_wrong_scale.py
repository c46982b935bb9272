"""An example submission with a classic mistake: it scales the scores by sqrt(d) instead of sqrt(d_k).

Try: grade mha examples/mha_wrong_scale.py   (exit code 1, and the diagnosis names the bug)
"""

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    K = (X @ Wk).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    V = (X @ Wv).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d).astype(X.dtype)   # the bug: d instead of d_k
    if mask is not None:
        mask = np.broadcast_to(mask, scores.shape)
        scores = np.where(mask, -np.inf, np.where(mask.all(-1, keepdims=True), 0, scores))
    scores = scores - scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(-1, keepdims=True)
    if mask is not None:
        weights = np.where(mask, 0, weights)
    context = (weights @ V).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (context @ Wo).astype(X.dtype)
