"""Correct variant: a normalised running output and a running log-sum-exp (torch.logsumexp / logaddexp)."""

import math

import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    s_q, d_k = Q.shape[-2], Q.shape[-1]
    o = torch.zeros_like(Q)
    lse = torch.full_like(Q[..., :1], float("-inf"))
    rows = torch.arange(s_q).view(-1, 1)
    for j in range(0, K.shape[-2], block_size):
        s = torch.matmul(Q, K[..., j:j + block_size, :].transpose(-1, -2)) / math.sqrt(d_k)
        if causal:
            cols = torch.arange(j, j + s.shape[-1]).view(1, -1)
            s = torch.where(cols > rows, torch.tensor(float("-inf"), dtype=s.dtype), s)
        new = torch.logaddexp(lse, torch.logsumexp(s, dim=-1, keepdim=True))
        ref = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
        o = torch.exp(lse - ref) * o + torch.exp(s - ref) @ V[..., j:j + block_size, :]
        lse = new
    return o
