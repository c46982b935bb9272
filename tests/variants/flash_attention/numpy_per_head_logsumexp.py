"""Correct variant: one (batch, head) at a time with 2-D arrays, keeping a normalised output and a running
log-sum-exp instead of (max, sum)."""

import math

import numpy as np


def _head(q, k, v, block, causal, dtype):
    s_q, d_k = q.shape
    o = np.zeros((s_q, d_k), dtype=dtype)
    lse = np.full((s_q, 1), -np.inf, dtype=dtype)
    rows = np.arange(s_q).reshape(-1, 1)
    for j in range(0, k.shape[0], block):
        scores = (q @ k[j:j + block].T) / dtype.type(math.sqrt(d_k))
        if causal:
            cols = np.arange(j, j + scores.shape[1]).reshape(1, -1)
            scores[cols > rows] = -np.inf
        block_lse = np.logaddexp.reduce(scores, axis=1, keepdims=True) if scores.shape[1] else -np.inf
        new_lse = np.logaddexp(lse, block_lse)
        keep = np.where(np.isneginf(new_lse), 0, np.exp(lse - np.where(np.isneginf(new_lse), 0, new_lse)))
        w = np.exp(scores - np.where(np.isneginf(new_lse), 0, new_lse))
        o = keep * o + w @ v[j:j + block]
        lse = new_lse
    return o


def flash_attention(Q, K, V, block_size=64, causal=False):
    out = np.zeros(Q.shape, dtype=Q.dtype)
    for bi in range(Q.shape[0]):
        for hi in range(Q.shape[1]):
            out[bi, hi] = _head(Q[bi, hi], K[bi, hi], V[bi, hi], block_size, causal, Q.dtype)
    return out
