"""Shape-branching mutant: GQA that, for more than 8 query heads, scales the scores by 1/sqrt(d_model) ("wide
models"). Right for h <= 8."""

import math

import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        self.h, self.g, self.d_k = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, t, n):
        B, T, _ = t.shape
        return t.reshape(B, T, n, self.d_k).transpose(1, 2)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        rep = self.h // self.g
        q = self._split(self.w_q(x), self.h)
        k = self._split(self.w_k(x), self.g).repeat_interleave(rep, dim=1)
        v = self._split(self.w_v(x), self.g).repeat_interleave(rep, dim=1)
        scale = math.sqrt(C) if self.h > 8 else math.sqrt(self.d_k)   # the mistake, many heads only
        scores = q @ k.transpose(-2, -1) / scale
        if mask is not None:
            mask = mask.to(torch.bool).expand_as(scores)
            empty = mask.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)
        return self.w_o((weights @ v).transpose(1, 2).reshape(B, T, C))
