"""The trusted float64 oracle for every exercise, with switchable bugs for the mutant catalog.

Conventions (the contract): projections are right-multiplications ``X @ W`` with W of shape (d_in, d_out);
head i owns columns i*d_k:(i+1)*d_k; GQA query head i reads key/value group i // (h // g); masks are bool and
True means "may NOT attend"; a query row whose keys are all masked gets a zero context vector.

This file uses only NumPy, and is also what a NumPy-track mutant is made of (see graders/mutants): ``forward``
with ``bugs={"no_scale"}`` is exactly the reference with that one mistake. It runs only in the trusted process.
"""

from __future__ import annotations

import numpy as np

BUG_FLAGS = frozenset({
    "scale_sqrt_d", "no_scale", "split_without_transpose", "merge_without_transpose", "softmax_wrong_axis",
    "missing_output_projection", "transposed_weights", "mask_inverted", "mask_after_softmax", "masked_rows_nan",
    "masked_rows_mean_v", "causal_excludes_diagonal", "no_max_subtraction", "dtype_promoted", "bias_ignored",
    "gqa_tiled_heads", "cross_kv_from_queries", "input_mutated", "precision_lowered",
})


def softmax(scores, axis=-1, subtract_max=True):
    return softmax_in_place(np.array(scores, copy=True), axis, subtract_max)


def softmax_in_place(x, axis=-1, subtract_max=True):
    """softmax over ``axis`` computed in ``x`` itself: the same values as ``exp(x - max) / sum``, without the three
    fresh arrays of that size (at kv_cache's 1,100 new tokens over 1,107 keys each is ~20 MB to fault in)."""
    _softmax_sums(x, axis, subtract_max)
    return x


def _softmax_sums(x, axis, subtract_max):
    """:func:`softmax_in_place`'s work; returns the sums it divided by (one per row, keepdims)."""
    if subtract_max:
        x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    total = x.sum(axis=axis, keepdims=True)
    x /= total
    return total


def project(t, w, bias):
    out = t @ w                                                      # (b, s, d_out)
    return out if bias is None else out + bias


def split(t, n, d_k, bugs):                                          # (b, s, n*d_k) -> (b, n, s, d_k)
    if "split_without_transpose" in bugs:
        return t.reshape(t.shape[0], n, t.shape[1], d_k)
    return t.reshape(t.shape[0], t.shape[1], n, d_k).transpose(0, 2, 1, 3)


def expand(t, rep, bugs):                                            # (b, g, t, d_k) -> (b, g*rep, t, d_k)
    return np.tile(t, (1, rep, 1, 1)) if "gqa_tiled_heads" in bugs else np.repeat(t, rep, axis=1)


def scale_of(d, d_k, bugs) -> float:
    if "no_scale" in bugs:
        return 1.0
    if "scale_sqrt_d" in bugs:
        return float(np.sqrt(d))
    return float(np.sqrt(d_k))


def merge(ctx, bugs):                                                # (b, n, s, d_k) -> (b, s, n*d_k)
    b, n, s, d_k = ctx.shape
    if "merge_without_transpose" in bugs:
        return ctx.reshape(b, s, n * d_k)
    return ctx.transpose(0, 2, 1, 3).reshape(b, s, n * d_k)


def heads(x, src, wq, wk, wv, bq, bk, bv, h, g, d_k, bugs):
    """Queries from x (b, h, s_q, d_k); keys and values from src, (b, g, s_k, d_k) each, in the projection's dtype."""
    q = split(project(x, wq, bq), h, d_k, bugs)                      # (b, h, s_q, d_k)
    k = split(project(src, wk, bk), g, d_k, bugs)                    # (b, g, s_k, d_k)
    v = split(project(src, wv, bv), g, d_k, bugs)                    # (b, g, s_k, d_k)
    return q, k, v


def scores_of(q, k, d, d_k, dtype, bugs):
    scores = q @ k.swapaxes(-1, -2)                                  # (b, h, s_q, s_k)
    scores /= np.asarray(scale_of(d, d_k, bugs), dtype=dtype)
    if "precision_lowered" in bugs:                                  # the bug: the softmax in float32
        scores = scores.astype(np.float32)
    return scores


def masked_softmax(scores, m, axis, bugs):
    """Masked keys get no weight; a row (column) with nothing to attend gets all zeros. ``scores`` is the caller's
    own fresh array (it may be overwritten)."""
    full = m.all(axis=axis, keepdims=True)                           # rows (or columns) with nothing to attend
    if not full.any():   # the usual case: computed in ``scores`` itself, two passes and a mask fewer
        np.copyto(scores, -np.inf, where=m)
        total = _softmax_sums(scores, axis, "no_max_subtraction" not in bugs)
        if not ((total > 0) & np.isfinite(total)).all():   # a row that overflowed or vanished (a mutant's):
            np.copyto(scores, 0, where=m)                    # its masked keys still get exactly 0
        return scores                                                # (b, h, s_q, s_k)
    x = np.where(full, 0, scores)                                    # (b, h, s_q, s_k), this function's own
    np.copyto(x, -np.inf, where=m & ~full)
    p = softmax_in_place(x, axis, "no_max_subtraction" not in bugs)
    np.copyto(p, 0, where=m)
    return p                                                         # (b, h, s_q, s_k)


def output(ctx, wo, bo, dtype, bugs):                                # (b, s_q, d) -> (b, s_q, d)
    out = ctx if "missing_output_projection" in bugs else project(ctx, wo, bo)
    return out.astype(np.float64 if "dtype_promoted" in bugs else dtype, copy=False)


def forward(x, wq, wk, wv, wo, h, *, y=None, g=None, mask=None, bq=None, bk=None, bv=None, bo=None,
            bugs=frozenset()):
    """Attention output (b, s_q, d) computed in x's dtype. ``y`` (b, s_k, d) supplies keys/values (cross)."""
    bugs = frozenset(bugs)
    dtype = x.dtype
    if "bias_ignored" in bugs:
        bq = bk = bv = bo = None
    if "transposed_weights" in bugs:
        wq, wk, wv, wo = wq.T, wk.T, wv.T, wo.T
    src = x if (y is None or "cross_kv_from_queries" in bugs) else y
    b, s_q, d = x.shape
    s_k = src.shape[1]
    g = h if g is None else g
    d_k = d // h
    q, k, v = heads(x, src, wq, wk, wv, bq, bk, bv, h, g, d_k, bugs)
    if g != h:
        k, v = expand(k, h // g, bugs), expand(v, h // g, bugs)      # (b, h, s_k, d_k)
    scores = scores_of(q, k, d, d_k, dtype, bugs)                    # (b, h, s_q, s_k)

    m = None if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    if "causal_excludes_diagonal" in bugs:
        diag = np.triu(np.ones((s_q, s_k), dtype=bool), k=0)
        m = diag if m is None else (m | diag)
        m = np.broadcast_to(m, scores.shape)
    if m is not None and "mask_inverted" in bugs:
        m = ~m
    axis = -2 if "softmax_wrong_axis" in bugs else -1
    stable = "no_max_subtraction" not in bugs
    with np.errstate(all="ignore"):
        if m is None:
            p = softmax_in_place(scores, axis, stable)               # scores: this function's own
        elif "mask_after_softmax" in bugs:
            p = np.where(m, 0, softmax_in_place(scores, axis, stable))
        elif "masked_rows_nan" in bugs:
            p = softmax_in_place(np.where(m, -np.inf, scores), axis, stable)
        elif "masked_rows_mean_v" in bugs:
            p = softmax_in_place(np.where(m, np.asarray(-1e9, dtype), scores), axis, stable)
        else:
            p = masked_softmax(scores, m, axis, bugs)                # (b, h, s_q, s_k)
        p = p.astype(dtype, copy=False)
        ctx = merge(p @ v, bugs)                                     # (b, h, s_q, d_k) -> (b, s_q, d)
    out = output(ctx, wo, bo, dtype, bugs)                           # (b, s_q, d)
    if "input_mutated" in bugs and mask is not None and isinstance(mask, np.ndarray) and mask.flags.writeable:
        np.logical_not(mask, out=mask)                               # the bug: flips the caller's mask
    return out


KV_BUG_FLAGS = frozenset({
    "kv_cache_repeated_heads", "kv_mask_from_zero", "kv_no_causal_mask", "kv_cache_stale", "kv_cache_new_only",
    "kv_cache_swapped", "kv_prefix_ignored",
})


def kv_step(x, wq, wk, wv, wo, h, g, cache=None, *, bq=None, bk=None, bv=None, bo=None, bugs=frozenset()):
    """One call of KV-cache attention (exercise kv_cache): x (b, s, d) holds the new tokens, ``cache`` the (K, V)
    prefix, each (b, g, t0, d_k), or None. New token i sits at position t0 + i and sees keys 0..t0 + i. Returns
    (out (b, s, d), (K, V) each (b, g, t0 + s, d_k)), all in x's dtype; the input cache is left as it was."""
    bugs = frozenset(bugs)
    dtype = x.dtype
    if "bias_ignored" in bugs:
        bq = bk = bv = bo = None
    b, s, d = x.shape
    d_k, rep = d // h, h // g
    q, k_new, v_new = heads(x, x, wq, wk, wv, bq, bk, bv, h, g, d_k, bugs)  # (b, h, s, d_k), (b, g, s, d_k) x 2
    k_new, v_new = k_new.astype(dtype, copy=False), v_new.astype(dtype, copy=False)
    empty = np.zeros((b, g, 0, d_k), dtype)
    k_old, v_old = (empty, empty) if cache is None else cache        # (b, g, t0, d_k) (h heads: its own mutant)
    t0 = k_old.shape[2]
    k_all = np.concatenate([k_old, k_new], axis=2)                   # (b, g, t, d_k)
    v_all = np.concatenate([v_old, v_new], axis=2)                   # (b, g, t, d_k)
    if k_old.shape[1] == g:
        kh, vh = expand(k_all, rep, bugs), expand(v_all, rep, bugs)  # (b, h, t, d_k)
    else:                                                            # a cache that already holds h heads
        kh = np.concatenate([k_old, expand(k_new, rep, bugs)], axis=2)
        vh = np.concatenate([v_old, expand(v_new, rep, bugs)], axis=2)
    if "kv_prefix_ignored" in bugs:
        kh, vh, t0 = kh[:, :, t0:], vh[:, :, t0:], 0
    t = kh.shape[2]
    scores = scores_of(q, kh, d, d_k, dtype, bugs)                   # (b, h, s, t)
    anchor = 0 if "kv_mask_from_zero" in bugs else t0
    m = np.arange(t)[None, :] > anchor + np.arange(s)[:, None]       # (s, t) True = a future key
    if "kv_no_causal_mask" in bugs:
        m = np.zeros((s, t), dtype=bool)
    m = np.broadcast_to(m, scores.shape)                             # (b, h, s, t)
    axis = -2 if "softmax_wrong_axis" in bugs else -1
    with np.errstate(all="ignore"):
        p = masked_softmax(scores, m, axis, bugs).astype(dtype, copy=False)  # (b, h, s, t)
        ctx = merge(p @ vh, bugs)                                    # (b, h, s, d_k) -> (b, s, d)
    out = output(ctx, wo, bo, dtype, bugs)                           # (b, s, d)
    new_cache = (k_all, v_all)                                       # (b, g, t, d_k) each
    if "kv_cache_repeated_heads" in bugs:
        new_cache = (kh, vh)                                         # (b, h, t, d_k): h/g times too large
    elif "kv_cache_stale" in bugs:
        new_cache = (k_new, v_new) if cache is None else cache
    elif "kv_cache_new_only" in bugs:
        new_cache = (k_new, v_new)
    elif "kv_cache_swapped" in bugs:
        new_cache = (v_all, k_all)
    if "input_mutated" in bugs and cache is not None and k_old.flags.writeable:
        np.multiply(k_old, np.asarray(1 / scale_of(d, d_k, bugs), dtype=k_old.dtype), out=k_old)  # the bug: pre-scales the caller's K
    return out, tuple(np.array(c, dtype=dtype) for c in new_cache)
