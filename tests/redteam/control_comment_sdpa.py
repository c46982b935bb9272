"""CONTROL (mha, torch): correct, and mentions the banned APIs only in comments and strings.

Neither the static scan nor the runtime tripwire may fire: the banned-API test passes, so does everything else.
"""

import math

import torch
from torch import nn

NOTE = "not using nn.MultiheadAttention or F.multi_head_attention_forward here"


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        # The fast path would be F.scaled_dot_product_attention(q, k, v), but the exercise bans it.
        b, s, d = x.shape
        q, k, v = (w(x).reshape(b, s, self.h, self.dk).transpose(1, 2) for w in (self.w_q, self.w_k, self.w_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            m = mask.to(torch.bool).expand_as(scores)
            full = m.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(m, float("-inf")).masked_fill(full, 0.0)
        w = torch.softmax(scores, dim=-1)
        if mask is not None:
            w = w.masked_fill(m, 0.0)
        return self.w_o((w @ v).transpose(1, 2).reshape(b, s, d))
