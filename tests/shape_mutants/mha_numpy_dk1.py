"""Shape-branching mutant: MHA that special-cases one-feature heads (d_k == 1) with a broadcast product and takes
the softmax over the query axis there. Right whenever d_k > 1."""

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    K = (X @ Wk).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    V = (X @ Wv).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    axis = -1
    if d_k == 1:
        scores = Q * K.transpose(0, 1, 3, 2)    # (b, h, s, 1) * (b, h, 1, s): an outer product, fine...
        axis = -2                               # ...but then normalised over the wrong axis
    else:
        scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)
    if mask is not None:
        mask = np.broadcast_to(mask, scores.shape)
        empty = mask.all(axis=axis, keepdims=True)
        scores = np.where(empty, 0, np.where(mask, -np.inf, scores))
    scores = scores - scores.max(axis=axis, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=axis, keepdims=True)
    if mask is not None:
        w = np.where(mask, 0, w)
    ctx = (w @ V).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False)
