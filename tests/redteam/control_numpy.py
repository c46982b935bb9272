"""CONTROL (mha, numpy): a correct implementation written independently of the reference (einsum). Must pass."""

import math

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    dk = d // h
    q = (X @ Wq).reshape(b, s, h, dk)
    k = (X @ Wk).reshape(b, s, h, dk)
    v = (X @ Wv).reshape(b, s, h, dk)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dk)
    if mask is not None:
        m = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
        full = m.all(axis=-1, keepdims=True)
        scores = np.where(full, 0.0, np.where(m, -np.inf, scores))
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    if mask is not None:
        w = np.where(m, 0.0, w)
    ctx = np.einsum("bhqk,bkhd->bqhd", w.astype(X.dtype, copy=False), v).reshape(b, s, d)
    return (ctx @ Wo).astype(X.dtype, copy=False)
