"""KV cache whose causal mask is cut from a fixed 256-position buffer (zero-padded beyond it): right while the cache
holds at most 256 positions, then chunks past 256 attend to their own future."""

import numpy as np

_FUTURE = np.triu(np.ones((256, 256), dtype=bool), k=1)             # (256, 256) a buffer sized once


def kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None):
    """X (b, s_new, d) new tokens; cache None or (K, V), each (b, g, t0, d_k). Returns (out (b, s_new, d),
    (K, V) each (b, g, t0 + s_new, d_k)); new token i sits at position t0 + i and sees keys 0..t0 + i."""
    b, s, d = X.shape
    d_k = d // h
    Q = (X @ Wq).reshape(b, s, h, d_k).transpose(0, 2, 1, 3)        # (b, h, s, d_k)
    K = (X @ Wk).reshape(b, s, g, d_k).transpose(0, 2, 1, 3)        # (b, g, s, d_k)
    V = (X @ Wv).reshape(b, s, g, d_k).transpose(0, 2, 1, 3)        # (b, g, s, d_k)
    if cache is not None:
        K_old, V_old = cache                                          # (b, g, t0, d_k) each
        if K_old.shape[0] != b or K_old.shape[1] != g or K_old.shape[3] != d_k:
            raise ValueError(f"cache of shape {K_old.shape} does not fit (b={b}, g={g}, d_k={d_k})")
        K = np.concatenate([K_old, K], axis=2)                        # (b, g, t, d_k) a new array
        V = np.concatenate([V_old, V], axis=2)                        # (b, g, t, d_k)
    t = K.shape[2]
    t0 = t - s
    Kh = np.repeat(K, h // g, axis=1)                                 # (b, h, t, d_k) head i -> group i // (h//g)
    Vh = np.repeat(V, h // g, axis=1)                                 # (b, h, t, d_k)
    scores = Q @ Kh.transpose(0, 1, 3, 2) / np.sqrt(d_k).astype(X.dtype)  # (b, h, s, t)
    future = np.zeros((s, t), dtype=bool)                             # (s, t)
    part = _FUTURE[t0:t0 + s, :t]                                     # empty beyond 256 positions (bug)
    future[:part.shape[0], :part.shape[1]] = part
    scores = np.where(future, -np.inf, scores)                        # (b, h, s, t)
    scores = scores - scores.max(axis=-1, keepdims=True)              # (b, h, s, t) stable softmax
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)           # (b, h, s, t)
    context = weights @ Vh                                            # (b, h, s, d_k)
    context = context.transpose(0, 2, 1, 3).reshape(b, s, d)          # (b, s, d)
    out = (context @ Wo).astype(X.dtype, copy=False)                  # (b, s, d)
    return out, (K.astype(X.dtype, copy=False), V.astype(X.dtype, copy=False))
