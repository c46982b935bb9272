"""Correct variant (masked_mha, NumPy): a loop over heads and batch rows, one 2-D problem at a time."""

import numpy as np


def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    b, s, d = X.shape
    dk = d // h
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    M = np.broadcast_to(mask, (b, h, s, s))
    ctx = np.zeros((b, s, d), dtype=X.dtype)
    for n in range(b):
        for i in range(h):
            cols = slice(i * dk, (i + 1) * dk)
            sc = Q[n, :, cols] @ K[n, :, cols].T / np.sqrt(dk)             # (s, s)
            allowed = ~M[n, i]
            for r in range(s):
                if not allowed[r].any():
                    continue                                                # zero context for this row
                z = sc[r, allowed[r]]
                w = np.exp(z - z.max())
                w = w / w.sum()
                ctx[n, r, cols] = w @ V[n, allowed[r], cols]
    return (ctx @ Wo).astype(X.dtype)
