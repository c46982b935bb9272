"""A correct computation returned as float16: every test compares dtype and precision."""

import math

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    dk = d // h
    q, k, v = ((X @ W).reshape(b, s, h, dk).transpose(0, 2, 1, 3) for W in (Wq, Wk, Wv))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dk)
    if mask is not None:
        m = np.broadcast_to(mask, scores.shape)
        scores = np.where(m.all(-1, keepdims=True), 0.0, np.where(m, -np.inf, scores))
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    if mask is not None:
        w = np.where(m, 0.0, w)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(b, s, d) @ Wo
    return out.astype(np.float16)
