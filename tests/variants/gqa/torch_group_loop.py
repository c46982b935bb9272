"""Correct variant (gqa, torch): a loop over key/value groups; each group serves h // g consecutive query
heads, computed together; -1e9 fill then zeroing."""

import math

import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        head_dim = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        dk = d // self.n_heads
        r = self.n_heads // self.n_kv_heads
        q = self.w_q(x).reshape(b, s, self.n_heads, dk).permute(0, 2, 1, 3)    # (b, h, s, dk)
        k, v = self.w_k(x), self.w_v(x)                                          # (b, s, g*dk)
        if mask is not None:
            mask = mask.broadcast_to((b, self.n_heads, s, s))
        outs = []
        for j in range(self.n_kv_heads):
            kj = k[..., j * dk:(j + 1) * dk].unsqueeze(1)                        # (b, 1, s, dk)
            vj = v[..., j * dk:(j + 1) * dk].unsqueeze(1)
            qj = q[:, j * r:(j + 1) * r]                                          # (b, r, s, dk)
            sc = qj @ kj.transpose(-1, -2) / math.sqrt(dk)                        # (b, r, s, s)
            if mask is not None:
                mj = mask[:, j * r:(j + 1) * r]
                sc = sc.masked_fill(mj, -1e9)
                w = torch.softmax(sc, dim=-1).masked_fill(mj, 0.0)
            else:
                w = torch.softmax(sc, dim=-1)
            outs.append(w @ vj)                                                   # (b, r, s, dk)
        ctx = torch.cat(outs, dim=1).permute(0, 2, 1, 3).reshape(b, s, d)
        return self.w_o(ctx)
