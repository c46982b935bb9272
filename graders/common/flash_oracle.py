"""Flash attention, NumPy only: the float64 standard-attention oracle, its analytic gradients, and a tiled
online-softmax forward with switchable bugs (the NumPy half of the flash_attention mutants).

Standalone on purpose (nothing but NumPy): graders/mutants/build.py writes this file out as a candidate file.
Causal alignment is top-left, as torch's scaled_dot_product_attention(is_causal=True): query i sees keys j <= i.
"""

import numpy as np

BUGS = frozenset()


def causal_hidden(s_q, s_k):
    """(s_q, s_k) bool, True where key j is in query i's future (j > i): top-left alignment."""
    return np.arange(s_k)[None, :] > np.arange(s_q)[:, None]


def attention(Q, K, V, causal=False):
    """Standard attention in float64: softmax(Q Kᵀ / sqrt(d_k)) V over the keys."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])            # (b, h, s_q, s_k), this function's own
    return _softmax_in_place(s, causal) @ v                           # (b, h, s_q, d_k)


def _softmax_in_place(s, causal):
    """softmax over the keys, in ``s`` itself (the same values as exp(s - max) / sum with the future hidden, without
    three more arrays of its size to fault in)."""
    if causal:
        np.copyto(s, -np.inf, where=causal_hidden(s.shape[-2], s.shape[-1]))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s                                                          # (b, h, s_q, s_k)


def attention_grads(Q, K, V, dO, causal=False):
    """Analytic float64 gradients of sum(attention(Q, K, V) * dO) with respect to Q, K and V."""
    q, k, v, g = (np.asarray(a, dtype=np.float64) for a in (Q, K, V, dO))
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale                            # (b, h, s_q, s_k)
    p = _softmax_in_place(s, causal)                                  # (b, h, s_q, s_k)
    dv = np.swapaxes(p, -1, -2) @ g                                   # (b, h, s_k, d_k)
    dp = g @ np.swapaxes(v, -1, -2)                                   # (b, h, s_q, s_k)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale      # (b, h, s_q, s_k)
    return {"Q": ds @ k, "K": np.swapaxes(ds, -1, -2) @ q, "V": dv}


def _out_dtype(dtype, bugs):
    """The output's dtype: the input's, or a mutant's (dtype_promoted: float64; precision_lowered: float32)."""
    if "dtype_promoted" in bugs:
        return np.float64
    return np.float32 if "precision_lowered" in bugs else dtype


def flash_forward(Q, K, V, block_size=64, causal=False, bugs=frozenset()):
    """Keys in blocks of ``block_size``, online softmax (running max m, running sum l, rescaled accumulator),
    computed in the inputs' dtype; each flag in ``bugs`` reproduces one catalogued mistake."""
    dtype = np.asarray(Q).dtype
    b, h, s_q, d_k = Q.shape
    s_k = K.shape[-2]
    scale = dtype.type(1.0 if "no_scale" in bugs else 1.0 / np.sqrt(d_k))
    if "input_mutated" in bugs:
        Q *= scale                                                    # the bug: scales the caller's Q in place
        q = Q
    else:
        q = Q * scale                                                 # (b, h, s_q, d_k)
    if "flash_full_scores" in bugs:                                   # the bug: the whole (s_q, s_k) matrix
        s = q @ np.swapaxes(K, -1, -2)                                # (b, h, s_q, s_k)
        if causal:
            s = np.where(causal_hidden(s_q, s_k), -np.inf, s)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        out = (p / p.sum(axis=-1, keepdims=True)) @ V
        return out.astype(_out_dtype(dtype, bugs), copy=False)
    m = np.full((b, h, s_q, 1), -np.inf, dtype=dtype)                 # running max
    l = np.zeros((b, h, s_q, 1), dtype=dtype)                         # running sum of exp
    acc = np.zeros((b, h, s_q, d_k), dtype=dtype)                     # running sum of exp * V
    rows = np.arange(s_q)[:, None]                                    # (s_q, 1) query positions
    offset = s_k - s_q if "flash_causal_bottom_right" in bugs else 0
    end = (s_k // block_size) * block_size if "flash_last_block_dropped" in bugs else s_k
    for start in range(0, end, block_size):
        kb = K[:, :, start:start + block_size]                        # (b, h, B, d_k)
        vb = V[:, :, start:start + block_size]                        # (b, h, B, d_k)
        s = q @ np.swapaxes(kb, -1, -2)                               # (b, h, s_q, B)
        if causal:
            first = 0 if "flash_causal_block_local" in bugs else start
            cols = np.arange(first, first + kb.shape[-2])[None, :]    # (1, B) key positions
            if "causal_excludes_diagonal" in bugs:
                hidden = cols >= rows + offset
            else:
                hidden = cols > rows + offset                         # (s_q, B)
            s = np.where(hidden, dtype.type(-np.inf), s)
        if "no_max_subtraction" in bugs:
            p = np.exp(s)
            alpha = np.ones_like(m)
        else:
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))      # (b, h, s_q, 1)
            safe = np.where(np.isneginf(m_new), dtype.type(0), m_new)  # rows with no visible key yet
            p = np.exp(s - safe)                                      # (b, h, s_q, B)
            alpha = np.exp(m - safe)                                  # (b, h, s_q, 1) rescales the old sums
            m = m_new
        l = (l if "flash_no_rescale_sum" in bugs else alpha * l) + p.sum(axis=-1, keepdims=True)
        acc = (acc if "flash_no_rescale_acc" in bugs else alpha * acc) + p @ vb
    with np.errstate(invalid="ignore", divide="ignore"):
        out = acc if "flash_no_final_divide" in bugs else acc / l      # (b, h, s_q, d_k)
    return out.astype(_out_dtype(dtype, bugs), copy=False)
