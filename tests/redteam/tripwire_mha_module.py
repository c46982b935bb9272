"""Torch track: wraps nn.MultiheadAttention. Static scan and runtime tripwire both fire; its parameter layout is
not one the grader loads either."""

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True)

    def forward(self, x, mask=None):
        out, _ = self.attn(x, x, x, need_weights=False)
        return out
