"""Correct variant: plain loop with explicit statistics, causal key blocks past the last query skipped, masks
built with triu on each (s_q, block) tile."""

import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    scale = Q.shape[-1] ** -0.5
    s_q, s_k = Q.size(2), K.size(2)
    row_max = torch.full(Q.shape[:-1], float("-inf"), dtype=Q.dtype)
    row_sum = torch.zeros(Q.shape[:-1], dtype=Q.dtype)
    out = torch.zeros_like(Q)
    stop = min(s_k, s_q) if causal else s_k
    start = 0
    while start < stop:
        end = min(start + block_size, s_k)
        scores = (Q @ K[:, :, start:end].transpose(2, 3)) * scale
        if causal:
            hide = torch.ones(s_q, end - start, dtype=torch.bool).triu(1 - start)
            scores = scores.masked_fill(hide, float("-inf"))
        new_max = torch.max(row_max, scores.max(dim=-1).values)
        weights = torch.exp(scores - new_max.unsqueeze(-1))
        factor = torch.exp(row_max - new_max)
        row_sum = row_sum * factor + weights.sum(-1)
        out = out * factor.unsqueeze(-1) + weights @ V[:, :, start:end]
        row_max = new_max
        start = end
    return out / row_sum.unsqueeze(-1)
