"""Correct variant (mha, torch): fused qkv plus `wo` (not w_o), finfo.min fill, explicit zeroing of
fully-masked rows by multiplying with a keep-row factor."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        hd = d // self.n_heads
        qkv = self.qkv(x).reshape(b, s, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)  # (3, b, h, s, hd)
        q, k, v = qkv.unbind(0)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        if mask is not None:
            mask = mask.bool().expand(scores.shape)
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
            probs = F.softmax(scores, dim=-1)
            keep_row = (~mask).any(dim=-1, keepdim=True).to(probs.dtype)   # 0 for fully-masked rows
            probs = probs * (~mask).to(probs.dtype) * keep_row
        else:
            probs = F.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, d)
        return self.wo(out)
