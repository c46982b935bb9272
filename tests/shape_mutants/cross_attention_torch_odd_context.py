"""Shape-branching mutant: cross-attention that processes context tokens in pairs and silently drops the last one
when s_k is odd (s_k > 1). Right for every even context length."""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
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

    def forward(self, x, context, mask=None):
        B, Tq, C = x.shape
        Tk = context.shape[1]
        if mask is not None:
            mask = mask.to(torch.bool).expand(B, self.n_heads, Tq, Tk)
        if Tk > 1 and Tk % 2 == 1:                          # the mistake: pairs only
            context = context[:, :-1]
            mask = None if mask is None else mask[..., :-1]
        q, k, v = self._split(self.w_q(x)), self._split(self.w_k(context)), self._split(self.w_v(context))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            empty = mask.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)
        return self.w_o((weights @ v).transpose(1, 2).reshape(B, Tq, C))
