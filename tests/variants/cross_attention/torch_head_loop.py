"""Correct variant (cross_attention, torch): a loop over heads with finfo.min fill and zeroing."""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, context, mask=None):
        b, sq, d = x.shape
        sk = context.shape[1]
        dk = d // self.n_heads
        q, k, v = self.w_q(x), self.w_k(context), self.w_v(context)
        if mask is not None:
            mask = torch.broadcast_to(mask, (b, self.n_heads, sq, sk))
        ctx = []
        for i in range(self.n_heads):
            qi, ki, vi = q[..., i * dk:(i + 1) * dk], k[..., i * dk:(i + 1) * dk], v[..., i * dk:(i + 1) * dk]
            sc = qi @ ki.transpose(-1, -2) / math.sqrt(dk)                        # (b, sq, sk)
            if mask is not None:
                sc = sc.masked_fill(mask[:, i], torch.finfo(sc.dtype).min)
                w = torch.softmax(sc, dim=-1) * (~mask[:, i])
            else:
                w = torch.softmax(sc, dim=-1)
            ctx.append(w @ vi)
        return self.w_o(torch.cat(ctx, dim=-1))
