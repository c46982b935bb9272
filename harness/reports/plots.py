"""The host-side derivations the HTML page draws from a report's sidecar arrays (:mod:`harness.core.sidecar`):
the reference attention pattern of a case, the per-head context vectors, and the attention pattern the
candidate's output implies where that can be derived.
"""

from __future__ import annotations

import numpy as np


def _split(t, n, d_k):
    return t.reshape(t.shape[0], t.shape[1], n, d_k).transpose(0, 2, 1, 3)


def reference_pattern(a: dict, h: int, g: int | None = None) -> np.ndarray:
    """The reference attention weights (b, h, s_q, s_k) of a case (contract: True = may NOT attend; a fully
    masked row attends to nothing)."""
    q, k = _queries_keys(a, h, g)
    d_k = q.shape[-1]
    g = k.shape[1]
    if g != h:
        k = np.repeat(k, h // g, axis=1)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(d_k)
    if "mask" not in a:
        m = np.zeros(scores.shape, dtype=bool)
    else:
        m = np.broadcast_to(a["mask"].astype(bool), scores.shape)
    full = m.all(-1, keepdims=True)
    s = np.where(m, -np.inf, scores)
    s = np.where(full, 0.0, s)
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    p = e / e.sum(-1, keepdims=True)
    return np.where(m, 0.0, p)


def _queries_keys(a: dict, h: int, g: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Q (b, h, s_q, d_k) and K (b, g, s_k, d_k) in float64: given (flash), or projected from x (and y), after a
    cached prefix ``pk`` when there is one (kv_cache)."""
    if "q" in a:
        return a["q"].astype(np.float64), a["k"].astype(np.float64)
    x = a["x"].astype(np.float64)
    src = a["y"].astype(np.float64) if "y" in a else x
    d_k = x.shape[-1] // h
    g = h if g is None else g
    q = _split(x @ a["wq"] + a.get("bq", 0), h, d_k)                  # (b, h, s_q, d_k)
    k = _split(src @ a["wk"] + a.get("bk", 0), g, d_k)                # (b, g, s_new, d_k)
    if "pk" in a:
        k = np.concatenate([a["pk"].astype(np.float64), k], axis=2)   # (b, g, t0 + s_new, d_k)
    return q, k


def values(a: dict, h: int, g: int | None = None) -> np.ndarray:
    """Per-head values (b, h, s_k, d_k) in float64."""
    if "v" in a:
        return a["v"].astype(np.float64)
    x = a["x"].astype(np.float64)
    src = a["y"].astype(np.float64) if "y" in a else x
    d_k = x.shape[-1] // h
    g = h if g is None else g
    v = _split(src @ a["wv"] + a.get("bv", 0), g, d_k)                # (b, g, s_new, d_k)
    if "pv" in a:
        v = np.concatenate([a["pv"].astype(np.float64), v], axis=2)   # (b, g, t0 + s_new, d_k)
    return np.repeat(v, h // g, axis=1) if g != h else v


def contexts(a: dict, h: int, out: np.ndarray) -> np.ndarray | None:
    """Per-head context vectors (b, h, s_q, d_k) that produce ``out`` through W_o (and b_o), or None when W_o
    is not safely invertible."""
    if "wo" not in a:   # flash: the output is the heads' contexts, merged
        return _split(out.astype(np.float64), h, out.shape[-1] // h) if np.all(np.isfinite(out)) else None
    wo = a["wo"].astype(np.float64)
    if wo.shape[0] != wo.shape[1] or not np.all(np.isfinite(out)) or np.linalg.cond(wo) > 1e8:
        return None
    ctx = (out.astype(np.float64) - a.get("bo", 0)) @ np.linalg.inv(wo)
    return _split(ctx, h, ctx.shape[-1] // h)


def implied_pattern(a: dict, h: int, g: int | None, out: np.ndarray, *, dtype: str = "float64"):
    """The attention weights the candidate's output implies, assuming its only mistakes are in the weights:
    out = merge(P_c V) W_o + b_o with the true V. Returns (P (b, h, s_q, s_k) with NaN where a row is not
    derivable, note) or (None, reason). Rows are solved by least squares from the head's values; when
    d_k < s_k, the extra equation sum(row) = 1 is added (and the note says so)."""
    ctx = contexts(a, h, out)
    if ctx is None:
        return None, "W_o is not invertible (or the output is not finite), so the context cannot be recovered"
    v = values(a, h, g)
    b, heads, s_k, d_k = v.shape
    s_q = ctx.shape[2]
    if d_k + 1 < s_k:
        return None, f"underdetermined: each head has d_k={d_k} values for s_k={s_k} keys"
    assume_sum = d_k < s_k
    tol = 1e-6 if dtype == "float64" else 1e-3
    p = np.full((b, heads, s_q, s_k), np.nan)
    for bi in range(b):
        for hi in range(heads):
            A = v[bi, hi].T                                          # (d_k, s_k)
            rhs = ctx[bi, hi].T                                      # (d_k, s_q)
            if assume_sum:
                A = np.vstack([A, np.ones((1, s_k))])
                rhs = np.vstack([rhs, np.ones((1, s_q))])
            if np.linalg.matrix_rank(A) < s_k:
                continue
            sol, *_ = np.linalg.lstsq(A, rhs, rcond=None)            # (s_k, s_q)
            resid = np.linalg.norm(A @ sol - rhs, axis=0) / (np.linalg.norm(rhs, axis=0) + 1e-12)
            rows = sol.T
            rows[resid > tol] = np.nan
            p[bi, hi] = rows
    if np.isnan(p).all():
        return None, "the output is not a mix of the reference values in any head"
    note = "solved from the output through W_o" + (", assuming each row sums to 1" if assume_sum else "")
    return p, note
