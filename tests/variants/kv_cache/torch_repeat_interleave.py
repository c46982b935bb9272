"""Correct variant (kv_cache, PyTorch): nanoGPT style with repeat_interleave and a causal mask built from
absolute positions."""

import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        self.h, self.g, self.dk = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.dk, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.dk, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q = self.w_q(x).reshape(B, T, self.h, self.dk).transpose(1, 2)
        k = self.w_k(x).reshape(B, T, self.g, self.dk).transpose(1, 2)
        v = self.w_v(x).reshape(B, T, self.g, self.dk).transpose(1, 2)
        if cache is not None:
            if cache[0].size(0) != B:
                raise RuntimeError("cache batch size mismatch")
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        Tk = k.size(2)
        r = self.h // self.g
        att = (q @ k.repeat_interleave(r, 1).transpose(-2, -1)) * (1.0 / math.sqrt(self.dk))
        pos = torch.arange(Tk - T, Tk).unsqueeze(1)
        att = att.masked_fill(torch.arange(Tk).unsqueeze(0) > pos, float("-inf"))
        y = att.softmax(dim=-1) @ v.repeat_interleave(r, 1)
        return self.w_o(y.transpose(1, 2).contiguous().view(B, T, C)), (k, v)
