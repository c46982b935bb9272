"""Shape-branching mutant: masked MHA that reads a (b, h, s, s) per-head mask as if it were the same for every head
(it keeps head 0's slice). Right for every other mask form."""

import numpy as np


def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    b, s, d = X.shape
    d_k = d // h
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim == 4 and mask.shape[1] > 1:
        mask = mask[:, :1]                      # the mistake: "heads share the mask"
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    K = (X @ Wk).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    V = (X @ Wv).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)
    mask = np.broadcast_to(mask, scores.shape)
    empty = mask.all(axis=-1, keepdims=True)
    scores = np.where(empty, 0, np.where(mask, -np.inf, scores))
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = np.where(mask, 0, w / w.sum(axis=-1, keepdims=True))
    ctx = (w @ V).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False)
