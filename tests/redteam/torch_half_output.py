"""Torch track: a correct module whose forward returns float16 (and detaches, so no gradients either)."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = (w(x).reshape(b, s, self.h, self.dk).transpose(1, 2) for w in (self.w_q, self.w_k, self.w_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            m = mask.to(torch.bool).expand_as(scores)
            scores = scores.masked_fill(m, float("-inf")).masked_fill(m.all(-1, keepdim=True), 0.0)
        w = torch.softmax(scores, dim=-1)
        if mask is not None:
            w = w.masked_fill(m, 0.0)
        return self.w_o((w @ v).transpose(1, 2).reshape(b, s, d)).detach().half()
