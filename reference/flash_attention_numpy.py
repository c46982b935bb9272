"""Reference solution: flash attention (keys in blocks, online softmax), NumPy track."""

import numpy as np


def flash_attention(Q, K, V, block_size=64, causal=False):
    B, nh, Tq, hs = Q.shape                                          # (B, nh, Tq, hs)
    Tk = K.shape[2]                                                  # K, V: (B, nh, Tk, hs)
    dtype = Q.dtype
    q = Q * dtype.type(1.0 / np.sqrt(hs))                            # (B, nh, Tq, hs) scaled once
    m = np.full((B, nh, Tq, 1), -np.inf, dtype=dtype)                # (B, nh, Tq, 1) running max
    l = np.zeros((B, nh, Tq, 1), dtype=dtype)                        # (B, nh, Tq, 1) running sum of exp
    acc = np.zeros((B, nh, Tq, hs), dtype=dtype)                     # (B, nh, Tq, hs) running sum of exp * V
    stop = min(Tk, Tq) if causal else Tk                             # causal: no query sees a key at Tq or later
    for start in range(0, stop, block_size):
        first = start if causal else 0                               # causal: queries before `start` see no key here
        kb = K[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        vb = V[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        s = q[:, :, first:] @ kb.swapaxes(-1, -2)                    # (B, nh, Tr, Bk) the Tr = Tq - first rows
        if causal:                                                   # top-left: query i sees keys j <= i
            over = np.arange(start, start + kb.shape[2]) > np.arange(first, Tq)[:, None]  # (Tr, Bk) key j > query i
            np.copyto(s, dtype.type(-np.inf), where=over)            # (B, nh, Tr, Bk)
        mr, lr, ar = m[:, :, first:], l[:, :, first:], acc[:, :, first:]  # views: (B, nh, Tr, 1) x2, (B, nh, Tr, hs)
        m_new = np.maximum(mr, s.max(axis=-1, keepdims=True))        # (B, nh, Tr, 1)
        safe = np.where(np.isneginf(m_new), dtype.type(0), m_new)    # (B, nh, Tr, 1) rows with no key yet
        s -= safe
        p = np.exp(s, out=s)                                         # (B, nh, Tr, Bk) in place: one tile alive
        alpha = np.exp(mr - safe)                                    # (B, nh, Tr, 1) rescales the old sums
        lr *= alpha
        lr += p.sum(axis=-1, keepdims=True)                          # (B, nh, Tr, 1)
        ar *= alpha
        ar += p @ vb                                                 # (B, nh, Tr, hs)
        mr[...] = m_new                                              # updated in place, like l and acc
    return acc / l                                                   # (B, nh, Tq, hs)
