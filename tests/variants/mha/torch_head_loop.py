"""Correct variant (mha, torch): separate w_q/w_k/w_v/w_o and a Python loop over heads."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        dk = d // self.n_heads
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)              # (b, s, d)
        if mask is not None:
            mask = torch.broadcast_to(mask, (b, self.n_heads, s, s))
        heads = []
        for i in range(self.n_heads):
            sl = slice(i * dk, (i + 1) * dk)
            scores = q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(dk)   # (b, s, s)
            if mask is None:
                w = torch.softmax(scores, dim=-1)
            else:
                m = mask[:, i]                                                  # (b, s, s)
                scores = scores.masked_fill(m, -1e9)
                w = torch.softmax(scores, dim=-1)
                w = torch.where(m, torch.zeros_like(w), w)                     # also zeroes empty rows
            heads.append(w @ v[..., sl])                                        # (b, s, dk)
        return self.w_o(torch.cat(heads, dim=-1))
