"""Correct variant (kv_cache, NumPy): no copy of repeated K/V — queries viewed as (b, g, h/g, s, dk) and einsum
against the g groups; the causal offset comes from the prefix length (triu with k = t0 + 1)."""

import numpy as np


def kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None):
    b, s, d = X.shape
    dk = d // h
    q = np.einsum("bsd,de->bse", X, Wq).reshape(b, s, g, h // g, dk)
    k = np.einsum("bsd,de->bse", X, Wk).reshape(b, s, g, dk).transpose(0, 2, 1, 3)
    v = np.einsum("bsd,de->bse", X, Wv).reshape(b, s, g, dk).transpose(0, 2, 1, 3)
    if cache is not None:
        k_old, v_old = (np.asarray(c) for c in cache)
        if k_old.ndim != 4 or k_old.shape[:2] != (b, g) or v_old.shape != k_old.shape:
            raise ValueError("cache does not match this batch")
        k = np.concatenate((k_old, k), axis=2)
        v = np.concatenate((v_old, v), axis=2)
    t0 = k.shape[2] - s
    scores = np.einsum("bsgrd,bgtd->bgrst", q, k) * (1.0 / np.sqrt(dk))
    scores[..., np.triu(np.ones((s, k.shape[2]), dtype=bool), k=t0 + 1)] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bgrst,bgtd->bsgrd", p, v).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False), (k.astype(X.dtype, copy=False), v.astype(X.dtype, copy=False))
