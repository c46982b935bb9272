"""Correct variant (kv_cache, PyTorch): queries grouped as (B, g, r, T, dk) so K/V are broadcast, never copied;
the cache is returned as fresh tensors."""

import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        g, r, dk = self.n_kv_heads, self.n_heads // self.n_kv_heads, self.head_dim
        q = self.w_q(x).reshape(B, T, g, r, dk).permute(0, 2, 3, 1, 4)     # (B, g, r, T, dk)
        k = self.w_k(x).reshape(B, T, g, dk).permute(0, 2, 1, 3)           # (B, g, T, dk)
        v = self.w_v(x).reshape(B, T, g, dk).permute(0, 2, 1, 3)
        if cache is not None:
            k_old, v_old = cache
            if k_old.shape[0] != B or v_old.shape[0] != B:
                raise ValueError(f"cache holds {k_old.shape[0]} sequences, x has {B}")
            k, v = torch.cat([k_old, k], 2), torch.cat([v_old, v], 2)
        t0 = k.shape[2] - T
        scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / math.sqrt(dk)
        mask = torch.ones(T, k.shape[2], dtype=torch.bool).triu(t0 + 1)
        w = torch.softmax(scores.masked_fill(mask, -math.inf), dim=-1)
        ctx = torch.einsum("bgrqk,bgkd->bqgrd", w, v).reshape(B, T, C)
        return self.w_o(ctx), (k.contiguous(), v.contiguous())
