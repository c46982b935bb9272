"""Correct variant (kv_cache, NumPy): computes in float64 and casts back; accepts the cache as any pair (a list
too) and returns a tuple of fresh arrays."""

import numpy as np


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None):
    dt = X.dtype
    X, Wq, Wk, Wv, Wo = (a.astype(np.float64) for a in (X, Wq, Wk, Wv, Wo))
    b, s, d = X.shape
    dk = d // h
    heads = lambda t, n: t.reshape(b, s, n, dk).transpose(0, 2, 1, 3)  # noqa: E731
    Q, Kn, Vn = heads(X @ Wq, h), heads(X @ Wk, g), heads(X @ Wv, g)
    prev_k, prev_v = (np.zeros((b, g, 0, dk)), np.zeros((b, g, 0, dk))) if cache is None else list(cache)
    if prev_k.shape[0] != b:
        raise ValueError("the cache belongs to a batch of another size")
    K = np.concatenate([prev_k.astype(np.float64), Kn], axis=2)
    V = np.concatenate([prev_v.astype(np.float64), Vn], axis=2)
    t = K.shape[2]
    idx = np.repeat(np.arange(g), h // g)                           # query head -> group
    sc = Q @ K[:, idx].transpose(0, 1, 3, 2) / np.sqrt(dk)          # (b, h, s, t)
    sc[..., np.arange(t)[None, :] > np.arange(t - s, t)[:, None]] = -np.inf
    ctx = (_softmax(sc) @ V[:, idx]).transpose(0, 2, 1, 3).reshape(b, s, d)
    return (ctx @ Wo).astype(dt), (K.astype(dt), V.astype(dt))
