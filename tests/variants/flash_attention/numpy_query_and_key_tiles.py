"""Correct variant: FlashAttention-2 style, blocks of queries (outer) and of keys (inner), einsum."""

import numpy as np


def flash_attention(Q, K, V, block_size=64, causal=False):
    b, h, s_q, d_k = Q.shape
    s_k = K.shape[2]
    scale = 1.0 / np.sqrt(d_k)
    out = np.empty_like(Q, shape=Q.shape, order="C")
    for qs in range(0, s_q, block_size):
        q = Q[:, :, qs:qs + block_size]
        n = q.shape[2]
        m = np.full((b, h, n), -np.inf, dtype=Q.dtype)
        l = np.zeros((b, h, n), dtype=Q.dtype)
        acc = np.zeros((b, h, n, d_k), dtype=Q.dtype)
        qpos = np.arange(qs, qs + n)
        for ks in range(0, s_k, block_size):
            if causal and ks > qpos[-1]:
                break  # every later key block is in the future of every query in this block
            k = K[:, :, ks:ks + block_size]
            v = V[:, :, ks:ks + block_size]
            s = np.einsum("bhqd,bhkd->bhqk", q, k) * Q.dtype.type(scale)
            if causal:
                kpos = np.arange(ks, ks + k.shape[2])
                s = np.where(kpos[None, :] > qpos[:, None], -np.inf, s).astype(Q.dtype, copy=False)
            m_new = np.maximum(m, s.max(axis=-1))
            p = np.exp(s - m_new[..., None])
            corr = np.exp(m - m_new)
            l = corr * l + p.sum(axis=-1)
            acc = corr[..., None] * acc + np.einsum("bhqk,bhkd->bhqd", p, v)
            m = m_new
        out[:, :, qs:qs + n] = acc / l[..., None]
    return out
