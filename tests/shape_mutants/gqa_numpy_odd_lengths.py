"""Shape-branching mutant: GQA that pads odd-length sequences with one zero token (to "pair up" tokens) and forgets
to mask that token as a key. Right for every even s."""

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    b, s, d = X.shape
    d_k = d // h
    Xk = X
    if s % 2 == 1:
        Xk = np.concatenate([X, np.zeros((b, 1, d), X.dtype)], axis=1)   # the padded key is never masked
        if mask is not None:
            mask = np.broadcast_to(np.asarray(mask, dtype=bool), mask.shape[:-1] + (s,))
            mask = np.concatenate([mask, np.zeros(mask.shape[:-1] + (1,), bool)], axis=-1)
    t = Xk.shape[1]
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)
    K = np.repeat((Xk @ Wk).reshape(b, t, g, d_k).transpose(0, 2, 1, 3), h // g, axis=1)
    V = np.repeat((Xk @ Wv).reshape(b, t, g, d_k).transpose(0, 2, 1, 3), h // g, axis=1)
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
