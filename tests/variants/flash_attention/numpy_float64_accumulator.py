"""Correct variant: accumulates in float64 whatever the input dtype, casts back at the end; skips key blocks
entirely in the future of every query."""

import numpy as np


def flash_attention(Q, K, V, block_size=64, causal=False):
    q = np.asarray(Q, dtype=np.float64) / np.sqrt(Q.shape[-1])
    s_q, s_k = Q.shape[2], K.shape[2]
    m = np.full(Q.shape[:3] + (1,), -np.inf)
    l = np.zeros(Q.shape[:3] + (1,))
    acc = np.zeros(Q.shape[:3] + (V.shape[-1],))
    qi = np.arange(s_q)[:, None]
    last = min(s_k, s_q) if causal else s_k   # top-left causal: no query sees a key past s_q - 1
    for j0 in range(0, last, block_size):
        j1 = min(j0 + block_size, s_k)
        s = q @ np.asarray(K[:, :, j0:j1], dtype=np.float64).transpose(0, 1, 3, 2)
        if causal:
            s = np.where(np.arange(j0, j1)[None, :] <= qi, s, -np.inf)
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        p = np.exp(s - m_new)
        scale_old = np.exp(m - m_new)
        l = l * scale_old + p.sum(-1, keepdims=True)
        acc = acc * scale_old + p @ np.asarray(V[:, :, j0:j1], dtype=np.float64)
        m = m_new
    return (acc / l).astype(Q.dtype)
