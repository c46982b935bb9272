"""Correct variant (masked_mha, torch): fused qkv + `wo`, einsum in float64 with finfo.min fill, explicit
zeroing of fully-masked rows, cast back to the input dtype before the output projection."""

import math

import torch
from torch import nn


class MaskedMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask):
        in_dtype = x.dtype
        b, s, d = x.shape
        dk = d // self.h
        q, k, v = self.qkv(x).to(torch.float64).reshape(b, s, 3, self.h, dk).unbind(2)   # (b, s, h, dk)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(dk)
        m = mask.to(torch.bool).broadcast_to(scores.shape)
        scores = scores.masked_fill(m, torch.finfo(torch.float64).min)
        p = torch.softmax(scores, dim=-1)
        keep = (~m).to(p.dtype)
        p = p * keep * keep.amax(dim=-1, keepdim=True)            # masked keys and empty rows -> 0
        ctx = torch.einsum("bhqk,bkhe->bqhe", p, v).reshape(b, s, d)
        return self.wo(ctx.to(in_dtype))
