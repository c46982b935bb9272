"""A torch implementation of every exercise with switchable bugs: the torch half of the mutant catalog.

``BUGS`` is replaced when a mutant file is written (graders/mutants/build.py). With no bugs it is a correct
reference; each flag reproduces the same mistake as the NumPy oracle's flag of the same name.
"""

import math

import torch
from torch import nn

BUGS = frozenset()


class _Attention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True):
        super().__init__()
        if "constructor_without_bias" in BUGS and bias is False:
            raise TypeError("__init__() got an unexpected keyword argument 'bias'")
        if "extra_bias" in BUGS:
            bias = True
        self.h, self.g = n_heads, n_kv_heads or n_heads
        self.d_k = d_model // n_heads
        d_kv = self.g * self.d_k

        def has(t):
            return bias and f"missing_bias_{t}" not in BUGS

        self.w_q = nn.Linear(d_model, d_model, bias=has("q"))
        self.w_k = nn.Linear(d_model, d_kv, bias=has("k"))
        self.w_v = nn.Linear(d_model, d_kv, bias=has("v"))
        self.w_o = nn.Linear(d_model, d_model, bias=has("o"))
        if "layout_renamed" in BUGS:                                  # the bug: the projections named otherwise
            for old, new in (("w_q", "q_proj"), ("w_k", "k_proj"), ("w_v", "v_proj"), ("w_o", "out_proj")):
                layer = self._modules.pop(old)
                self.add_module(new, layer)
                object.__setattr__(self, old, layer)

    @staticmethod
    def _proj(lin, t):
        weight = lin.weight.T if "transposed_weights" in BUGS else lin.weight
        bias = None if "bias_ignored" in BUGS else lin.bias
        return nn.functional.linear(t, weight, bias)

    def _split(self, t, n):                                          # (B, T, n*hs) -> (B, n, T, hs)
        B, T, _ = t.shape
        if "split_without_transpose" in BUGS:
            return t.reshape(B, n, T, self.d_k)
        return t.reshape(B, T, n, self.d_k).transpose(1, 2)

    def _attend(self, x, src, mask):
        B, Tq, C = x.shape
        if "cross_kv_from_queries" in BUGS:
            src = x
        Tk = src.shape[1]
        q = self._split(self._proj(self.w_q, x), self.h)             # (B, h, Tq, hs)
        k = self._split(self._proj(self.w_k, src), self.g)           # (B, g, Tk, hs)
        v = self._split(self._proj(self.w_v, src), self.g)           # (B, g, Tk, hs)
        if self.g != self.h:
            r = self.h // self.g
            if "gqa_tiled_heads" in BUGS:
                k, v = k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)
            else:
                k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)  # (B, h, Tk, hs)
        if "no_scale" in BUGS:
            scale = 1.0
        elif "scale_sqrt_d" in BUGS:
            scale = math.sqrt(C)
        else:
            scale = math.sqrt(self.d_k)
        scores = q @ k.transpose(-2, -1) / scale                      # (B, h, Tq, Tk)
        m = None if mask is None else mask.to(torch.bool).expand_as(scores)
        if "causal_excludes_diagonal" in BUGS:
            diag = torch.triu(torch.ones(Tq, Tk, dtype=torch.bool), diagonal=0)
            m = diag.expand_as(scores) if m is None else (m | diag)
        if m is not None and "mask_inverted" in BUGS:
            m = ~m
        axis = -2 if "softmax_wrong_axis" in BUGS else -1

        def softmax(s):
            if "precision_lowered" in BUGS:                           # the bug: the softmax in float32
                return torch.softmax(s.float(), dim=axis).to(s.dtype)
            if "no_max_subtraction" in BUGS:
                e = torch.exp(s)
                return e / e.sum(dim=axis, keepdim=True)
            return torch.softmax(s, dim=axis)

        if m is None:
            p = softmax(scores)
        elif "mask_after_softmax" in BUGS:
            p = softmax(scores).masked_fill(m, 0.0)
        elif "masked_rows_nan" in BUGS:
            p = softmax(scores.masked_fill(m, float("-inf")))
        elif "masked_rows_mean_v" in BUGS:
            p = softmax(scores.masked_fill(m, -1e9))
        else:
            full = m.all(dim=axis, keepdim=True)
            p = softmax(scores.masked_fill(m & ~full, float("-inf")).masked_fill(full, 0.0)).masked_fill(m, 0.0)
        ctx = p @ v                                                   # (B, h, Tq, hs)
        if "merge_without_transpose" in BUGS:
            ctx = ctx.reshape(B, Tq, C)
        else:
            ctx = ctx.transpose(1, 2).reshape(B, Tq, C)               # (B, Tq, C)
        out = ctx if "missing_output_projection" in BUGS else self._proj(self.w_o, ctx)
        if "input_mutated" in BUGS and mask is not None:
            mask.logical_not_()                                       # the bug: flips the caller's mask
        if "dtype_promoted" in BUGS:
            out = out.double()
        return out


class MultiHeadAttention(_Attention):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__(d_model, n_heads, bias=bias)

    def forward(self, x, mask=None):
        return self._attend(x, x, mask)


class MaskedMultiHeadAttention(MultiHeadAttention):
    def forward(self, x, mask):
        return self._attend(x, x, mask)


class CrossAttention(MultiHeadAttention):
    def forward(self, x, context, mask=None):
        return self._attend(x, context, mask)


class GroupedQueryAttention(_Attention):
    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__(d_model, n_heads, n_kv_heads, bias=bias)

    def forward(self, x, mask=None):
        return self._attend(x, x, mask)


class KVCacheAttention(_Attention):
    """kv_cache: causal GQA over the new tokens plus a cached (K, V) prefix; returns (out, (K, V))."""

    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__(d_model, n_heads, n_kv_heads, bias=bias)

    def _expand(self, t):                                             # (B, g, T, hs) -> (B, h, T, hs)
        r = self.h // self.g
        return t.repeat(1, r, 1, 1) if "gqa_tiled_heads" in BUGS else t.repeat_interleave(r, dim=1)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q = self._split(self._proj(self.w_q, x), self.h)             # (B, h, T, hs)
        k_new = self._split(self._proj(self.w_k, x), self.g)         # (B, g, T, hs)
        v_new = self._split(self._proj(self.w_v, x), self.g)         # (B, g, T, hs)
        if cache is None:
            empty = x.new_zeros(B, self.g, 0, self.d_k)
            k_old, v_old = empty, empty
        else:
            k_old, v_old = cache                                      # (B, g, T0, hs)
        t0 = k_old.shape[2]
        k_all = torch.cat([k_old, k_new], dim=2)                      # (B, g, Tk, hs)
        v_all = torch.cat([v_old, v_new], dim=2)
        if k_old.shape[1] == self.g:
            kh, vh = self._expand(k_all), self._expand(v_all)         # (B, h, Tk, hs)
        else:                                                         # its own cache of h repeated heads
            kh = torch.cat([k_old, self._expand(k_new)], dim=2)
            vh = torch.cat([v_old, self._expand(v_new)], dim=2)
        if "kv_prefix_ignored" in BUGS:
            kh, vh, t0 = kh[:, :, t0:], vh[:, :, t0:], 0
        Tk = kh.shape[2]
        if "no_scale" in BUGS:
            scale = 1.0
        elif "scale_sqrt_d" in BUGS:
            scale = math.sqrt(C)
        else:
            scale = math.sqrt(self.d_k)
        scores = q @ kh.transpose(-2, -1) / scale                     # (B, h, T, Tk)
        anchor = 0 if "kv_mask_from_zero" in BUGS else t0
        m = torch.arange(Tk)[None, :] > anchor + torch.arange(T)[:, None]   # (T, Tk) future keys
        if "kv_no_causal_mask" in BUGS:
            m = torch.zeros(T, Tk, dtype=torch.bool)
        m = m.expand_as(scores)
        axis = -2 if "softmax_wrong_axis" in BUGS else -1
        full = m.all(dim=axis, keepdim=True)
        s = scores.masked_fill(m & ~full, float("-inf")).masked_fill(full, 0.0)
        if "no_max_subtraction" in BUGS:
            e = torch.exp(s)
            p = e / e.sum(dim=axis, keepdim=True)
        elif "precision_lowered" in BUGS:                             # the bug: the softmax in float32
            p = torch.softmax(s.float(), dim=axis).to(s.dtype)
        else:
            p = torch.softmax(s, dim=axis)
        ctx = p.masked_fill(m, 0.0) @ vh                              # (B, h, T, hs)
        if "merge_without_transpose" in BUGS:
            ctx = ctx.reshape(B, T, C)
        else:
            ctx = ctx.transpose(1, 2).reshape(B, T, C)                # (B, T, C)
        out = ctx if "missing_output_projection" in BUGS else self._proj(self.w_o, ctx)
        if "dtype_promoted" in BUGS:
            out = out.double()
        new = (k_all, v_all)
        if "kv_cache_repeated_heads" in BUGS:
            new = (kh, vh)
        elif "kv_cache_stale" in BUGS:
            new = (k_new, v_new) if cache is None else cache
        elif "kv_cache_new_only" in BUGS:
            new = (k_new, v_new)
        elif "kv_cache_swapped" in BUGS:
            new = (v_all, k_all)
        if "input_mutated" in BUGS and cache is not None:
            with torch.no_grad():
                k_old.mul_(1.0 / scale)                               # the bug: pre-scales the caller's K
        return out, tuple(t.detach().clone() if t is k_old or t is v_old else t for t in new)

def flash_attention(Q, K, V, block_size=64, causal=False):
    """flash_attention (keys in blocks, online softmax) with the same flags as graders/common/flash_oracle.py."""
    B, nh, Tq, hs = Q.shape                                          # (B, nh, Tq, hs)
    Tk = K.shape[2]                                                  # K, V: (B, nh, Tk, hs)
    scale = 1.0 if "no_scale" in BUGS else 1.0 / math.sqrt(hs)
    if "input_mutated" in BUGS and not Q.requires_grad:
        q = Q.mul_(scale)                                             # the bug: scales the caller's Q in place
    else:
        q = Q * scale                                                 # (B, nh, Tq, hs)
    rows = torch.arange(Tq)[:, None]                                  # (Tq, 1) query positions
    if "flash_full_scores" in BUGS:                                   # the bug: the whole (Tq, Tk) matrix
        s = q @ K.transpose(-2, -1)                                   # (B, nh, Tq, Tk)
        if causal:
            s = s.masked_fill(torch.arange(Tk)[None, :] > rows, float("-inf"))
        out = torch.softmax(s, dim=-1) @ V                            # (B, nh, Tq, hs)
        return _flash_dtype(out)
    m = Q.new_full((B, nh, Tq, 1), float("-inf"))                     # running max
    l = Q.new_zeros((B, nh, Tq, 1))                                   # running sum of exp
    acc = Q.new_zeros((B, nh, Tq, hs))                                # running sum of exp * V
    offset = Tk - Tq if "flash_causal_bottom_right" in BUGS else 0
    end = (Tk // block_size) * block_size if "flash_last_block_dropped" in BUGS else Tk
    for start in range(0, end, block_size):
        kb = K[:, :, start:start + block_size]                        # (B, nh, Bk, hs)
        vb = V[:, :, start:start + block_size]                        # (B, nh, Bk, hs)
        s = q @ kb.transpose(-2, -1)                                  # (B, nh, Tq, Bk)
        if causal:
            first = 0 if "flash_causal_block_local" in BUGS else start
            cols = torch.arange(first, first + kb.shape[2])[None, :]  # (1, Bk) key positions
            hidden = cols >= rows + offset if "causal_excludes_diagonal" in BUGS else cols > rows + offset
            s = s.masked_fill(hidden, float("-inf"))
        if "no_max_subtraction" in BUGS:
            p = torch.exp(s)
            alpha = torch.ones_like(m)
        else:
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))    # (B, nh, Tq, 1)
            safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)      # rows with no visible key yet
            p = torch.exp(s - safe)                                   # (B, nh, Tq, Bk)
            alpha = torch.exp(m - safe)                               # (B, nh, Tq, 1)
            m = m_new
        l = (l if "flash_no_rescale_sum" in BUGS else alpha * l) + p.sum(dim=-1, keepdim=True)
        acc = (acc if "flash_no_rescale_acc" in BUGS else alpha * acc) + p @ vb
    out = acc if "flash_no_final_divide" in BUGS else acc / l         # (B, nh, Tq, hs)
    return _flash_dtype(out)


def _flash_dtype(out):
    """The output's dtype: the input's, or a mutant's (dtype_promoted: float64; precision_lowered: float32)."""
    if "dtype_promoted" in BUGS:
        return out.double()
    return out.float() if "precision_lowered" in BUGS else out
