"""Correct variant (gqa, torch): no repeat — queries viewed as (b, g, h//g, s, dk) and einsum against each
group's k/v; computed in float64 with finfo.min fill and explicit zeroing of fully-masked rows."""

import math

import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        self.h, self.g = n_heads, n_kv_heads
        kv_dim = n_kv_heads * (d_model // n_heads)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, kv_dim, bias=bias)
        self.w_v = nn.Linear(d_model, kv_dim, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        g, r, dk = self.g, self.h // self.g, d // self.h
        q = self.w_q(x).double().reshape(b, s, g, r, dk)                 # head i = group j*r + t
        k = self.w_k(x).double().reshape(b, s, g, dk)
        v = self.w_v(x).double().reshape(b, s, g, dk)
        scores = torch.einsum("bqgre,bkge->bgrqk", q, k) / math.sqrt(dk)  # (b, g, r, s, s)
        if mask is not None:
            m = torch.broadcast_to(mask, (b, self.h, s, s)).reshape(b, g, r, s, s)
            scores = scores.masked_fill(m, torch.finfo(scores.dtype).min)
            p = torch.softmax(scores, dim=-1)
            p = p.masked_fill(m, 0.0).masked_fill(m.all(dim=-1, keepdim=True), 0.0)
        else:
            p = torch.softmax(scores, dim=-1)
        ctx = torch.einsum("bgrqk,bkge->bqgre", p, v).reshape(b, s, d)
        return self.w_o(ctx.to(x.dtype))
