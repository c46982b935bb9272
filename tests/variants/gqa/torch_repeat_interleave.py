"""Correct variant (gqa, torch): expand k/v to h heads with repeat_interleave; -inf fill made safe."""

import math

import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        self.h, self.g, self.dk = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.dk, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.dk, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q = self.w_q(x).reshape(B, T, self.h, self.dk).transpose(1, 2)          # (B, h, T, dk)
        k = self.w_k(x).reshape(B, T, self.g, self.dk).transpose(1, 2)          # (B, g, T, dk)
        v = self.w_v(x).reshape(B, T, self.g, self.dk).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.g, dim=1)                        # (B, h, T, dk)
        v = v.repeat_interleave(self.h // self.g, dim=1)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            mask = mask.expand_as(att)
            empty = mask.all(dim=-1, keepdim=True)
            att = att.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
            att = torch.softmax(att, dim=-1).masked_fill(mask, 0.0)
        else:
            att = torch.softmax(att, dim=-1)
        return self.w_o((att @ v).transpose(1, 2).reshape(B, T, C))
