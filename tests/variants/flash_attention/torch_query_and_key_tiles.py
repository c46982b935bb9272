"""Correct variant: FlashAttention-2 style over tensors, blocks of queries (outer) and keys (inner), einsum,
results concatenated."""

import math

import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    b, h, s_q, d_k = Q.shape
    s_k = K.shape[2]
    outs = []
    for qs in range(0, s_q, block_size):
        q = Q[:, :, qs:qs + block_size] / math.sqrt(d_k)
        n = q.shape[2]
        m = torch.full((b, h, n, 1), float("-inf"), dtype=Q.dtype)
        l = torch.zeros((b, h, n, 1), dtype=Q.dtype)
        acc = torch.zeros((b, h, n, d_k), dtype=Q.dtype)
        qpos = torch.arange(qs, qs + n).unsqueeze(1)
        for ks in range(0, s_k, block_size):
            if causal and ks > qs + n - 1:
                break
            k, v = K[:, :, ks:ks + block_size], V[:, :, ks:ks + block_size]
            s = torch.einsum("bhqd,bhkd->bhqk", q, k)
            if causal:
                kpos = torch.arange(ks, ks + k.shape[2]).unsqueeze(0)
                s = s.masked_fill(kpos > qpos, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True)).detach()
            p = torch.exp(s - m_new)
            corr = torch.exp(m - m_new)
            l = corr * l + p.sum(-1, keepdim=True)
            acc = corr * acc + torch.einsum("bhqk,bhkd->bhqd", p, v)
            m = m_new
        outs.append(acc / l)
    return torch.cat(outs, dim=2)
