"""CONTROL (mha, torch): a correct module with a fused qkv projection. Must pass (including the banned-API test)."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.h, self.dk).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            m = mask.to(torch.bool).expand_as(scores)
            full = m.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(m, float("-inf")).masked_fill(full, 0.0)
        w = torch.softmax(scores, dim=-1)
        if mask is not None:
            w = w.masked_fill(m, 0.0)
        return self.wo((w @ v).transpose(1, 2).reshape(b, s, d))
