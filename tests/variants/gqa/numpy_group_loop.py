"""Correct variant (gqa, NumPy): a loop over key/value groups; each group serves h // g consecutive query heads."""

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    b, s, d = X.shape
    dk = d // h
    r = h // g                                          # query heads per group
    Q, K, V = X @ Wq, X @ Wk, X @ Wv                    # (b, s, d), (b, s, g*dk), (b, s, g*dk)
    M = None if mask is None else np.broadcast_to(mask, (b, h, s, s))
    ctx = np.empty((b, s, d), dtype=np.result_type(Q, V))
    for j in range(g):
        kj = K[..., j * dk:(j + 1) * dk]                # (b, s, dk)
        vj = V[..., j * dk:(j + 1) * dk]
        for i in range(j * r, (j + 1) * r):             # the query heads that read group j
            qi = Q[..., i * dk:(i + 1) * dk]
            sc = qi @ kj.swapaxes(1, 2) / np.sqrt(dk)
            if M is not None:
                sc = np.where(M[:, i], -1e9, sc)
            sc = sc - sc.max(axis=-1, keepdims=True)
            w = np.exp(sc)
            w /= w.sum(axis=-1, keepdims=True)
            if M is not None:
                w[M[:, i]] = 0.0                        # masked keys and fully-masked rows -> 0
            ctx[..., i * dk:(i + 1) * dk] = w @ vj
    return (ctx @ Wo).astype(X.dtype)
