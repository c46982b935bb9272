"""Reference solution: masked multi-head attention, PyTorch track."""

import math

import torch
from torch import nn


class MaskedMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, t):                                             # (B, T, C) -> (B, nh, T, hs)
        B, T, _ = t.shape
        return t.reshape(B, T, self.n_heads, self.d_k).transpose(1, 2)

    def forward(self, x, mask):
        B, T, C = x.shape                                            # (B, T, C)
        q = self._split(self.w_q(x))                                 # (B, nh, T, hs)
        k = self._split(self.w_k(x))                                 # (B, nh, T, hs)
        v = self._split(self.w_v(x))                                 # (B, nh, T, hs)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)       # (B, nh, T, T)
        mask = mask.to(torch.bool).expand_as(scores)                 # (B, nh, T, T), True = may not attend
        empty = mask.all(dim=-1, keepdim=True)                       # (B, nh, T, 1) rows with no key left
        scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)                      # (B, nh, T, T)
        weights = weights.masked_fill(mask, 0.0)                     # fully-masked rows -> zero context
        context = weights @ v                                        # (B, nh, T, hs)
        context = context.transpose(1, 2).reshape(B, T, C)           # (B, T, C)
        return self.w_o(context)                                     # (B, T, C)
