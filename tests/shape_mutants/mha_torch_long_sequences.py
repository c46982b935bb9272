"""Shape-branching mutant: MHA with a separate path for T > 256 ("long context") that scales the scores by
1/sqrt(d_model) instead of 1/sqrt(d_k). Right for every T <= 256: only a case longer than the sweep's lengths sees it."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, t):
        B, T, _ = t.shape
        return t.reshape(B, T, self.n_heads, self.d_k).transpose(1, 2)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = self._split(self.w_q(x)), self._split(self.w_k(x)), self._split(self.w_v(x))
        scale = math.sqrt(self.d_k)
        if T > 256:
            scale = math.sqrt(C)                             # the mistake, long inputs only
        scores = q @ k.transpose(-2, -1) / scale
        if mask is not None:
            mask = mask.to(torch.bool).expand_as(scores)
            empty = mask.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)
        return self.w_o((weights @ v).transpose(1, 2).reshape(B, T, C))
