"""Correct variant (cross_attention, torch): heads folded into the batch (b*h) with bmm, computed in float64,
explicit zeroing of fully-masked rows, cast back to the input dtype."""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _fold(self, t):                                                    # (b, n, d) -> (b*h, n, dk)
        b, n, _ = t.shape
        return t.double().reshape(b, n, self.h, self.dk).permute(0, 2, 1, 3).reshape(b * self.h, n, self.dk)

    def forward(self, x, context, mask=None):
        b, sq, d = x.shape
        sk = context.shape[1]
        q, k, v = self._fold(self.w_q(x)), self._fold(self.w_k(context)), self._fold(self.w_v(context))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.dk)     # (b*h, sq, sk)
        if mask is not None:
            m = torch.broadcast_to(mask, (b, self.h, sq, sk)).reshape(b * self.h, sq, sk)
            scores = scores.masked_fill(m, -1e9)
            p = torch.softmax(scores, dim=-1).masked_fill(m, 0.0)
            p = p.masked_fill(m.all(dim=-1, keepdim=True), 0.0)
        else:
            p = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(p, v).reshape(b, self.h, sq, self.dk).permute(0, 2, 1, 3).reshape(b, sq, d)
        return self.w_o(ctx.to(x.dtype))
