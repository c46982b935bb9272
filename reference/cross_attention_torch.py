"""Reference solution: multi-head cross-attention, PyTorch track."""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
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

    def forward(self, x, context, mask=None):
        B, Tq, C = x.shape                                           # (B, Tq, C) queries
        q = self._split(self.w_q(x))                                 # (B, nh, Tq, hs)
        k = self._split(self.w_k(context))                           # (B, nh, Tk, hs)
        v = self._split(self.w_v(context))                           # (B, nh, Tk, hs)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)       # (B, nh, Tq, Tk)
        if mask is not None:
            mask = mask.to(torch.bool).expand_as(scores)             # (B, nh, Tq, Tk)
            empty = mask.all(dim=-1, keepdim=True)                   # (B, nh, Tq, 1) rows with no key
            scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)                      # (B, nh, Tq, Tk)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)                 # fully-masked rows -> zero context
        out = weights @ v                                            # (B, nh, Tq, hs)
        out = out.transpose(1, 2).reshape(B, Tq, C)                  # (B, Tq, C)
        return self.w_o(out)                                         # (B, Tq, C)
