"""Torch track: reaches F.scaled_dot_product_attention through getattr with a computed name, so the host's
static scan sees nothing; the worker's runtime tripwire still fires."""

import torch
import torch.nn.functional as F
from torch import nn

_attend = getattr(F, "scaled_" + "dot_" + "product_attention")


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
        allowed = None if mask is None else ~mask.to(torch.bool)
        ctx = _attend(q, k, v, attn_mask=allowed)
        if mask is not None:
            ctx = ctx.masked_fill(mask.to(torch.bool).expand(b, self.h, s, s).all(-1, keepdim=True), 0.0)
        return self.w_o(ctx.transpose(1, 2).reshape(b, s, d))
