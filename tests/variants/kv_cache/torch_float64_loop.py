"""Correct variant (kv_cache, PyTorch): a per-head loop computed in float64 and cast back to the input dtype."""

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
        B, T, _ = x.shape
        dk = self.dk
        q, k_new, v_new = self.w_q(x), self.w_k(x), self.w_v(x)             # (B, T, ...)
        k_new = k_new.reshape(B, T, self.g, dk).transpose(1, 2)
        v_new = v_new.reshape(B, T, self.g, dk).transpose(1, 2)
        if cache is None:
            k, v = k_new, v_new
        else:
            if len(cache) != 2 or cache[0].shape[0] != B:
                raise ValueError("bad cache")
            k, v = torch.cat([cache[0], k_new], dim=2), torch.cat([cache[1], v_new], dim=2)
        Tk = k.shape[2]
        allowed = torch.tril(torch.ones(T, Tk, dtype=torch.bool), diagonal=Tk - T)
        outs = []
        for i in range(self.h):
            j = i // (self.h // self.g)
            qi = q[..., i * dk:(i + 1) * dk].double()
            s = qi @ k[:, j].double().transpose(1, 2) / math.sqrt(dk)
            s = s.masked_fill(~allowed, float("-inf"))
            outs.append((torch.softmax(s, -1) @ v[:, j].double()).to(x.dtype))
        return self.w_o(torch.cat(outs, dim=-1)), (k, v)
