"""Reference solution: grouped-query attention, PyTorch track."""

import math

import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        assert n_heads % n_kv_heads == 0, "n_heads must be a multiple of n_kv_heads"
        self.n_heads, self.n_kv_heads, self.d_k = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, t, n):                                          # (B, T, n*hs) -> (B, n, T, hs)
        B, T, _ = t.shape
        return t.reshape(B, T, n, self.d_k).transpose(1, 2)

    def forward(self, x, mask=None):
        B, T, C = x.shape                                            # (B, T, C)
        rep = self.n_heads // self.n_kv_heads
        q = self._split(self.w_q(x), self.n_heads)                   # (B, nh, T, hs)
        k = self._split(self.w_k(x), self.n_kv_heads)                # (B, ng, T, hs)
        v = self._split(self.w_v(x), self.n_kv_heads)                # (B, ng, T, hs)
        k = k.repeat_interleave(rep, dim=1)                          # (B, nh, T, hs) head i -> group i // rep
        v = v.repeat_interleave(rep, dim=1)                          # (B, nh, T, hs)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)       # (B, nh, T, T)
        if mask is not None:
            mask = mask.to(torch.bool).expand_as(scores)             # (B, nh, T, T)
            empty = mask.all(dim=-1, keepdim=True)                   # (B, nh, T, 1) rows with no key
            scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)                      # (B, nh, T, T)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)                 # fully-masked rows -> zero context
        context = weights @ v                                        # (B, nh, T, hs)
        context = context.transpose(1, 2).reshape(B, T, C)           # (B, T, C)
        return self.w_o(context)                                     # (B, T, C)
