"""KV cache (torch) whose causal mask is cut from a fixed 256-position buffer, GPT-2 style (zero-padded beyond
it): right while the cache holds at most 256 positions, then chunks past 256 attend to their own future."""

import math

import torch
from torch import nn

_FUTURE = torch.ones(256, 256, dtype=torch.bool).triu(1)            # (256, 256) a buffer sized once


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        assert n_heads % n_kv_heads == 0, "n_heads must be a multiple of n_kv_heads"
        self.n_heads, self.n_kv_heads, self.d_k = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, t, n):                                          # (B, T, n*hs) -> (B, n, T, hs)
        B, T, _ = t.shape
        return t.reshape(B, T, n, self.d_k).transpose(1, 2)

    def forward(self, x, cache=None):
        B, T, C = x.shape                                            # (B, T, C) the new tokens
        rep = self.n_heads // self.n_kv_heads
        q = self._split(self.w_q(x), self.n_heads)                   # (B, nh, T, hs)
        k = self._split(self.w_k(x), self.n_kv_heads)                # (B, ng, T, hs)
        v = self._split(self.w_v(x), self.n_kv_heads)                # (B, ng, T, hs)
        if cache is not None:
            k_old, v_old = cache                                     # (B, ng, T0, hs) each
            if k_old.shape[0] != B or k_old.shape[1] != self.n_kv_heads or k_old.shape[3] != self.d_k:
                raise ValueError(f"cache of shape {tuple(k_old.shape)} does not fit "
                                 f"(B={B}, n_kv_heads={self.n_kv_heads}, d_k={self.d_k})")
            k = torch.cat([k_old.to(k.dtype), k], dim=2)             # (B, ng, Tk, hs) a new tensor
            v = torch.cat([v_old.to(v.dtype), v], dim=2)             # (B, ng, Tk, hs)
        Tk = k.shape[2]
        kh = k.repeat_interleave(rep, dim=1)                         # (B, nh, Tk, hs) head i -> group i // rep
        vh = v.repeat_interleave(rep, dim=1)                         # (B, nh, Tk, hs)
        scores = q @ kh.transpose(-2, -1) / math.sqrt(self.d_k)      # (B, nh, T, Tk)
        future = torch.zeros(T, Tk, dtype=torch.bool)                # (T, Tk)
        part = _FUTURE[Tk - T:Tk, :Tk]                               # empty beyond 256 positions (bug)
        future[:part.shape[0], :part.shape[1]] = part
        scores = scores.masked_fill(future, float("-inf"))           # (B, nh, T, Tk)
        weights = torch.softmax(scores, dim=-1)                      # (B, nh, T, Tk)
        context = weights @ vh                                       # (B, nh, T, hs)
        context = context.transpose(1, 2).reshape(B, T, C)           # (B, T, C)
        return self.w_o(context), (k, v)                             # (B, T, C), ((B, ng, Tk, hs), (B, ng, Tk, hs))
