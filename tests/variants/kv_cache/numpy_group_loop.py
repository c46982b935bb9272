"""Correct variant (kv_cache, NumPy): a loop over key/value groups and the query heads that read each; the mask
is built from absolute positions."""

import numpy as np


def kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None):
    b, s, d = X.shape
    dk = d // h
    r = h // g
    Q = X @ Wq                                                      # (b, s, d)
    Kn = (X @ Wk).reshape(b, s, g, dk).transpose(0, 2, 1, 3)        # (b, g, s, dk)
    Vn = (X @ Wv).reshape(b, s, g, dk).transpose(0, 2, 1, 3)
    if cache is None:
        K, V = Kn, Vn
    else:
        if cache[0].shape[0] != b:
            raise ValueError(f"cache batch {cache[0].shape[0]} != input batch {b}")
        K = np.concatenate([cache[0], Kn], axis=2)
        V = np.concatenate([cache[1], Vn], axis=2)
    t = K.shape[2]
    pos_q = np.arange(t - s, t)                                     # absolute positions of the new tokens
    hidden = np.arange(t)[None, :] > pos_q[:, None]                 # (s, t)
    ctx = np.empty((b, s, d), dtype=X.dtype)
    for j in range(g):
        for i in range(j * r, (j + 1) * r):
            qi = Q[..., i * dk:(i + 1) * dk]                        # (b, s, dk)
            sc = qi @ K[:, j].swapaxes(1, 2) / np.sqrt(dk)          # (b, s, t)
            sc = np.where(hidden, -np.inf, sc)
            w = np.exp(sc - sc.max(axis=-1, keepdims=True))
            w /= w.sum(axis=-1, keepdims=True)
            ctx[..., i * dk:(i + 1) * dk] = w @ V[:, j]
    return (ctx @ Wo).astype(X.dtype), (K.astype(X.dtype), V.astype(X.dtype))
