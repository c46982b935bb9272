"""flash attention (torch) whose running max starts at 0 instead of -inf: right unless every score of a row is far
below zero (exp underflows to 0 and the row becomes 0/0)."""

import math

import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    B, nh, Tq, hs = Q.shape                                          # (B, nh, Tq, hs)
    Tk = K.shape[2]                                                  # K, V: (B, nh, Tk, hs)
    q = Q * (1.0 / math.sqrt(hs))                                    # (B, nh, Tq, hs) scaled once
    m = Q.new_zeros((B, nh, Tq, 1))                                  # (B, nh, Tq, 1) running max starts at 0 (bug)
    l = Q.new_zeros((B, nh, Tq, 1))                                  # (B, nh, Tq, 1) running sum of exp
    acc = Q.new_zeros((B, nh, Tq, hs))                               # (B, nh, Tq, hs) running sum of exp * V
    rows = torch.arange(Tq, device=Q.device)[:, None]                # (Tq, 1) query positions
    for start in range(0, Tk, block_size):
        kb = K[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        vb = V[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        s = q @ kb.transpose(-2, -1)                                 # (B, nh, Tq, Bk)
        if causal:                                                   # top-left: query i sees keys j <= i
            cols = torch.arange(start, start + kb.shape[2], device=Q.device)[None, :]  # (1, Bk) key positions
            s = s.masked_fill(cols > rows, float("-inf"))            # (B, nh, Tq, Bk)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))       # (B, nh, Tq, 1)
        safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)         # (B, nh, Tq, 1) rows with no key yet
        p = torch.exp(s - safe)                                      # (B, nh, Tq, Bk)
        alpha = torch.exp(m - safe)                                  # (B, nh, Tq, 1) rescales the old sums
        l = alpha * l + p.sum(dim=-1, keepdim=True)                  # (B, nh, Tq, 1)
        acc = alpha * acc + p @ vb                                   # (B, nh, Tq, hs)
        m = m_new
    return acc / l                                                   # (B, nh, Tq, hs)
