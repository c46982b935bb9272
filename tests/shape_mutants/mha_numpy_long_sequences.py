"""Shape-branching mutant: MHA with a separate, query-chunked code path for s > 100 that forgets the mask.
Right for every s <= 100, and for longer sequences without a mask."""

import numpy as np


def _attend(Q, K, V, mask):
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1]).astype(Q.dtype)
    if mask is not None:
        mask = np.broadcast_to(mask, scores.shape)
        empty = mask.all(axis=-1, keepdims=True)
        scores = np.where(empty, 0, np.where(mask, -np.inf, scores))
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    if mask is not None:
        w = np.where(mask, 0, w)
    return w @ V


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    K = (X @ Wk).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    V = (X @ Wv).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    if s > 100:                                 # "long sequences: process queries in chunks to save memory"
        ctx = np.concatenate([_attend(Q[:, :, i:i + 64], K, V, None) for i in range(0, s, 64)], axis=2)
    else:
        ctx = _attend(Q, K, V, mask)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False)
