"""Analytic float64 gradients of the reference attention (so the host never needs torch to check gradients)."""

from __future__ import annotations

import numpy as np

from harness.core.case import Case


def _softmax_masked(scores, m):
    if m is None:
        z = scores - scores.max(-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(-1, keepdims=True)
    full = m.all(-1, keepdims=True)
    z = np.where(m & ~full, -np.inf, np.where(full, 0.0, scores))
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return np.where(m, 0.0, e / e.sum(-1, keepdims=True))


def reference_grads(case: Case, grad_out: np.ndarray) -> dict[str, np.ndarray]:
    """d(sum(out * grad_out)) with respect to x, y (cross), every weight and every bias that exists. A KV cache
    (``case.cache``, kv_cache) is a constant prefix of the keys and values: the mask then spans prefix + new."""
    f = np.float64
    x = case.x.astype(f)
    src = x if case.y is None else case.y.astype(f)
    wq, wk, wv, wo = (w.astype(f) for w in (case.wq, case.wk, case.wv, case.wo))
    zeros = lambda n: np.zeros(n, f)  # noqa: E731
    bq, bk, bv, bo = ((bb.astype(f) if bb is not None else zeros(w.shape[1]))
                      for bb, w in ((case.bq, wq), (case.bk, wk), (case.bv, wv), (case.bo, wo)))
    b, s_q, d = x.shape
    h = case.h
    g = case.g or h
    dk, rep = d // h, h // g
    sc = np.sqrt(dk)
    empty = np.zeros((b, g, 0, dk), f)
    k_old, v_old = (empty, empty) if case.cache is None else (a.astype(f) for a in case.cache)  # (b, g, t0, dk)
    t0 = k_old.shape[2]
    s_k = t0 + src.shape[1]

    def split(t, n):                                                   # (b, s, n*dk) -> (b, n, s, dk)
        return t.reshape(t.shape[0], t.shape[1], n, dk).transpose(0, 2, 1, 3)

    def merge(t):                                                      # (b, n, s, dk) -> (b, s, n*dk)
        return t.transpose(0, 2, 1, 3).reshape(t.shape[0], t.shape[2], -1)

    q = split(x @ wq + bq, h)                                          # (b, h, s_q, dk)
    k = np.repeat(np.concatenate([k_old, split(src @ wk + bk, g)], 2), rep, axis=1)  # (b, h, s_k, dk)
    v = np.repeat(np.concatenate([v_old, split(src @ wv + bv, g)], 2), rep, axis=1)  # (b, h, s_k, dk)
    m = None if case.mask is None else np.broadcast_to(case.mask, (b, h, s_q, s_k))
    p = _softmax_masked(q @ k.swapaxes(-1, -2) / sc, m)                # (b, h, s_q, s_k)
    c = merge(p @ v)                                                   # (b, s_q, d)
    gout = grad_out.astype(f)                                          # (b, s_q, d)
    grads = {"wo": np.einsum("bsi,bsj->ij", c, gout), "bo": gout.sum((0, 1))}
    dctx = split(gout @ wo.T, h)                                       # (b, h, s_q, dk)
    dp = dctx @ v.swapaxes(-1, -2)                                     # (b, h, s_q, s_k)
    dv = p.swapaxes(-1, -2) @ dctx                                     # (b, h, s_k, dk)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))                    # (b, h, s_q, s_k)
    dq = ds @ k / sc                                                   # (b, h, s_q, dk)
    dkk = ds.swapaxes(-1, -2) @ q / sc                                 # (b, h, s_k, dk)
    dK = merge(dkk.reshape(b, g, rep, s_k, dk).sum(2))[:, t0:]         # (b, s_k - t0, g*dk) not the prefix's
    dV = merge(dv.reshape(b, g, rep, s_k, dk).sum(2))[:, t0:]          # (b, s_k - t0, g*dk)
    dQ = merge(dq)                                                     # (b, s_q, d)
    grads.update(wq=np.einsum("bsi,bsj->ij", x, dQ), bq=dQ.sum((0, 1)),
                 wk=np.einsum("bsi,bsj->ij", src, dK), bk=dK.sum((0, 1)),
                 wv=np.einsum("bsi,bsj->ij", src, dV), bv=dV.sum((0, 1)))
    dx = dQ @ wq.T
    dsrc = dK @ wk.T + dV @ wv.T
    if case.y is None:
        grads["x"] = dx + dsrc
    else:
        grads["x"], grads["y"] = dx, dsrc
    if case.bq is None:
        for name in ("bq", "bk", "bv", "bo"):
            grads.pop(name)
    return grads
