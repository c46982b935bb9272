"""Correct variant (mha, NumPy): a Python loop over heads, slicing columns i*d_k:(i+1)*d_k."""

import numpy as np


def _softmax_rows(z, masked):
    """Softmax over the last axis; masked entries get 0 and a fully-masked row gives all zeros."""
    keep = ~masked
    any_keep = keep.any(axis=-1, keepdims=True)
    z = np.where(keep, z, -np.inf)
    z_max = np.where(any_keep, z.max(axis=-1, keepdims=True), 0)
    e = np.exp(z - z_max)                                   # exp(-inf) = 0 for masked keys
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(any_keep, total, 1)


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    dk = d // h
    Q, K, V = X @ Wq, X @ Wk, X @ Wv                    # (b, s, d) each
    m = np.zeros((b, h, s, s), dtype=bool) if mask is None else np.broadcast_to(mask, (b, h, s, s))
    heads = []
    for i in range(h):
        cols = slice(i * dk, (i + 1) * dk)
        q, k, v = Q[:, :, cols], K[:, :, cols], V[:, :, cols]          # (b, s, dk)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(dk).astype(X.dtype)  # (b, s, s)
        weights = _softmax_rows(scores, m[:, i])
        heads.append(weights @ v)                                        # (b, s, dk)
    context = np.concatenate(heads, axis=-1)                             # (b, s, d)
    return (context @ Wo).astype(X.dtype, copy=False)
