"""flash attention whose running max starts at 0 instead of -inf: right unless every score of a row is far below
zero (exp underflows to 0 and the row becomes 0/0)."""

import numpy as np


def flash_attention(Q, K, V, block_size=64, causal=False):
    B, nh, Tq, hs = Q.shape                                          # (B, nh, Tq, hs)
    Tk = K.shape[2]                                                  # K, V: (B, nh, Tk, hs)
    dtype = Q.dtype
    q = Q * dtype.type(1.0 / np.sqrt(hs))                            # (B, nh, Tq, hs) scaled once
    m = np.zeros((B, nh, Tq, 1), dtype=dtype)                        # (B, nh, Tq, 1) running max starts at 0 (bug)
    l = np.zeros((B, nh, Tq, 1), dtype=dtype)                        # (B, nh, Tq, 1) running sum of exp
    acc = np.zeros((B, nh, Tq, hs), dtype=dtype)                     # (B, nh, Tq, hs) running sum of exp * V
    rows = np.arange(Tq)[:, None]                                    # (Tq, 1) query positions
    for start in range(0, Tk, block_size):
        kb = K[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        vb = V[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        s = q @ kb.swapaxes(-1, -2)                                  # (B, nh, Tq, Bk)
        if causal:                                                   # top-left: query i sees keys j <= i
            cols = np.arange(start, start + kb.shape[2])[None, :]    # (1, Bk) key positions
            s = np.where(cols > rows, dtype.type(-np.inf), s)        # (B, nh, Tq, Bk)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))         # (B, nh, Tq, 1)
        safe = np.where(np.isneginf(m_new), dtype.type(0), m_new)    # (B, nh, Tq, 1) rows with no key yet
        p = np.exp(s - safe)                                         # (B, nh, Tq, Bk)
        alpha = np.exp(m - safe)                                     # (B, nh, Tq, 1) rescales the old sums
        l = alpha * l + p.sum(axis=-1, keepdims=True)                # (B, nh, Tq, 1)
        acc = alpha * acc + p @ vb                                   # (B, nh, Tq, hs)
        m = m_new
    return acc / l                                                   # (B, nh, Tq, hs)
