"""Correct variant (cross_attention, torch): einsum with heads as an axis; -inf fill made safe for empty rows."""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, context, mask=None):
        b, sq, d = x.shape
        sk = context.shape[1]
        dk = d // self.h
        q = self.w_q(x).reshape(b, sq, self.h, dk)
        k = self.w_k(context).reshape(b, sk, self.h, dk)
        v = self.w_v(context).reshape(b, sk, self.h, dk)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(dk)
        if mask is not None:
            m = mask.expand(b, self.h, sq, sk)
            empty = m.all(-1, keepdim=True)
            scores = torch.where(m, float("-inf"), scores)
            scores = torch.where(empty, 0.0, scores)
            p = torch.where(m, 0.0, scores.softmax(-1))
        else:
            p = scores.softmax(-1)
        return self.w_o(torch.einsum("bhqk,bkhe->bqhe", p, v).reshape(b, sq, d))
