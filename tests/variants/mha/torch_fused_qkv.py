"""Correct variant (mha, torch): fused qkv = nn.Linear(d, 3d) plus w_o; -inf fill with empty rows made safe."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)                       # (B, T, C) each
        q, k, v = (t.reshape(B, T, self.h, self.dk).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dk))  # (B, h, T, T)
        if mask is not None:
            mask = torch.broadcast_to(mask, att.shape)
            empty = mask.all(dim=-1, keepdim=True)
            att = att.masked_fill(mask & ~empty, float("-inf")).masked_fill(empty, 0.0)
            att = torch.softmax(att, dim=-1).masked_fill(mask, 0.0)
        else:
            att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.w_o(y)
