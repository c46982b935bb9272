"""Correct variant (cross_attention, NumPy): a loop over heads; -1e9 fill, then zero weights on masked keys."""

import numpy as np


def cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None):
    b, s_q, d = X.shape
    s_k = Y.shape[1]
    dk = d // h
    Q = X @ Wq                                   # (b, s_q, d)
    K = Y @ Wk                                   # (b, s_k, d)
    V = Y @ Wv                                   # (b, s_k, d)
    M = None if mask is None else np.broadcast_to(mask, (b, h, s_q, s_k))
    heads = []
    for i in range(h):
        c = slice(i * dk, (i + 1) * dk)
        sc = np.matmul(Q[..., c], np.swapaxes(K[..., c], 1, 2)) / np.sqrt(dk)   # (b, s_q, s_k)
        if M is not None:
            sc = np.where(M[:, i], -1e9, sc)
        sc = sc - sc.max(axis=-1, keepdims=True)
        w = np.exp(sc)
        w = w / w.sum(axis=-1, keepdims=True)
        if M is not None:
            w = np.where(M[:, i], 0.0, w)        # masked keys: 0; fully-masked rows: all 0
        heads.append(np.matmul(w, V[..., c]))
    return (np.concatenate(heads, axis=-1) @ Wo).astype(X.dtype)
