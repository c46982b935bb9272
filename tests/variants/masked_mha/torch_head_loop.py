"""Correct variant (masked_mha, torch): separate projections, a loop over heads, -1e9 fill then zeroing."""

import math

import torch
from torch import nn


class MaskedMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask):
        b, s, d = x.shape
        dk = d // self.h
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        mask = torch.broadcast_to(mask, (b, self.h, s, s))
        outs = []
        for i in range(self.h):
            qi, ki, vi = (t[:, :, i * dk:(i + 1) * dk] for t in (q, k, v))
            sc = torch.bmm(qi, ki.transpose(1, 2)) / math.sqrt(dk)
            sc = sc.masked_fill(mask[:, i], -1e9)
            w = torch.softmax(sc, dim=-1).masked_fill(mask[:, i], 0.0)
            outs.append(torch.bmm(w, vi))
        return self.w_o(torch.cat(outs, dim=-1))
