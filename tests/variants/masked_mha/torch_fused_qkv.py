"""Correct variant (masked_mha, torch): fused qkv Linear(d, 3d) + w_o, -inf fill made safe for empty rows."""

import math

import torch
from torch import nn


class MaskedMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask):
        B, T, C = x.shape
        hs = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.reshape(B, T, self.n_heads, hs).transpose(1, 2)
        k = k.reshape(B, T, self.n_heads, hs).transpose(1, 2)
        v = v.reshape(B, T, self.n_heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = mask.expand_as(att)
        empty = mask.all(dim=-1, keepdim=True)
        att = att.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        att = att.softmax(dim=-1).masked_fill(mask, 0.0)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.w_o(y)
