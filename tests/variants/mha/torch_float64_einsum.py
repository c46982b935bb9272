"""Correct variant (mha, torch): einsum, all attention math in float64, cast back to the input dtype."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        dtype = x.dtype
        b, s, d = x.shape
        dk = d // self.h
        q = self.w_q(x).double().reshape(b, s, self.h, dk)
        k = self.w_k(x).double().reshape(b, s, self.h, dk)
        v = self.w_v(x).double().reshape(b, s, self.h, dk)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(dk)
        if mask is not None:
            m = mask.to(torch.bool).expand(b, self.h, s, s)
            scores = scores.masked_fill(m, -1e30)
            p = torch.softmax(scores, dim=-1) * (~m)
            p = p * (~m).any(dim=-1, keepdim=True)
        else:
            p = torch.softmax(scores, dim=-1)
        ctx = torch.einsum("bhqk,bkhe->bqhe", p, v).reshape(b, s, d)
        return self.w_o(ctx.to(dtype))
