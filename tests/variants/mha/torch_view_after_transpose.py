"""Buggy variant (mha, torch): `.view` on the INPUT. Correct for contiguous inputs; raises
"view size is not compatible with input tensor's size and stride" when x is a transposed view.
Expected to fail only the non-contiguous-input tests."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        dk = C // self.h
        flat = x.view(B * T, C)                        # the bug: needs a (B, T)-mergeable layout
        q = self.w_q(flat).view(B, T, self.h, dk).transpose(1, 2)
        k = self.w_k(flat).view(B, T, self.h, dk).transpose(1, 2)
        v = self.w_v(flat).view(B, T, self.h, dk).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(dk)
        if mask is not None:
            mask = mask.expand(B, self.h, T, T)
            empty = mask.all(dim=-1, keepdim=True)
            att = att.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
            att = torch.softmax(att, dim=-1).masked_fill(mask, 0.0)
        else:
            att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.w_o(y)
