"""attention_cost: the exact answers, with each catalogued mistake as a switch (graders/mutants/catalog.py).

Standalone on purpose (the standard library only): with ``BUGS`` set it is also the python track's mutant file
(graders/mutants/build.py writes it out). Every count is an exact int; ``bugs=None`` means the module's BUGS.
Conventions (the prompt states them): one MHA forward pass with d_k = d / h; a multiply-add is 2 FLOPs; the
projections (X @ W) and the two matrix products of attention (Q·Kᵀ and weights·V) count, the softmax, the
scaling, the mask and the bias additions do not; a parameter count includes the biases when ``bias``.
"""

BUGS = frozenset()


def _bugs(bugs):
    return BUGS if bugs is None else frozenset(bugs)


def _d_k(d, h, on):
    if "cost_float_counts" in on:
        return d / h                  # true division: a float, and so is everything computed from it
    return d if "cost_dk_as_d" in on else d // h


def shapes(b, s, d, h, bugs=None):
    on = _bugs(bugs)
    d_k = _d_k(d, h, on)
    full = (b, s, d)
    heads = (b, s, h, d_k) if "cost_heads_not_transposed" in on else (b, h, s, d_k)
    scores = (b, s, s) if "cost_scores_without_heads" in on else (b, h, s, s)
    return {"X": full, "Q": full, "K": full, "V": full, "Q_heads": heads, "K_heads": heads, "V_heads": heads,
            "scores": scores, "weights": scores, "context": heads, "merged": full, "output": full}


def _projection_params(d, h, g, on):
    """(weights, biases) of W_q, W_k, W_v, W_o with g key/value groups (g = h: MHA)."""
    d_k = _d_k(d, h, on)
    if "cost_gqa_kv_with_h" in on:
        g = h
    d_q = d_kv = None
    if "cost_params_grow_with_h" in on:  # every head given full-width projections of its own
        d_q, d_kv = h * d, g * d
    d_q = d if d_q is None else d_q
    d_kv = g * d_k if d_kv is None else d_kv
    weights = [d * d_q, d * d_kv, d * d_kv, d * d]
    biases = [d, g * d_k, g * d_k, d]
    if "cost_wo_forgotten" in on:
        weights, biases = weights[:3], biases[:3]
    n_biases = sum(biases)
    if "cost_bias_per_head" in on:
        n_biases *= h
    if "cost_bias_forgotten" in on:
        n_biases = 0
    return sum(weights), n_biases


def params(d, h, bias=True, bugs=None):
    weights, biases = _projection_params(d, h, h, _bugs(bugs) - {"cost_gqa_kv_with_h"})
    return weights + (biases if bias else 0)


def gqa_params(d, h, g, bias=True, bugs=None):
    weights, biases = _projection_params(d, h, g, _bugs(bugs))
    return weights + (biases if bias else 0)


def _attention_flops(b, s_q, s_k, d, h, on):
    """Q·Kᵀ and weights·V: 2 · (2·b·h·s_q·s_k·d_k) multiply-adds counted as 2 FLOPs each."""
    if "cost_s_squared_missing" in on:
        return 0
    d_k = _d_k(d, h, on)
    per_product = 2 * b * h * s_q * s_k * d_k
    return per_product if "cost_s_squared_once" in on else 2 * per_product


def _projection_flops(b, s_q, s_k, d, h, on):
    """X @ W_q over s_q tokens, Y @ W_k and Y @ W_v over s_k, merged @ W_o over s_q."""
    if "cost_cross_kv_over_sq" in on:
        s_k = s_q
    width = h * d if "cost_params_grow_with_h" in on else d
    flops = 2 * b * s_q * d * width + 2 * (2 * b * s_k * d * width)
    if "cost_wo_forgotten" not in on:
        flops += 2 * b * s_q * d * d
    return flops


def _flops(b, s_q, s_k, d, h, on):
    total = _projection_flops(b, s_q, s_k, d, h, on) + _attention_flops(b, s_q, s_k, d, h, on)
    return total // 2 if "cost_madd_one_flop" in on else total


def flops(b, s, d, h, bugs=None):
    return _flops(b, s, s, d, h, _bugs(bugs) - {"cost_cross_kv_over_sq"})


def cross_flops(b, s_q, s_k, d, h, bugs=None):
    return _flops(b, s_q, s_k, d, h, _bugs(bugs))


def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem, bugs=None):
    on = _bugs(bugs)
    heads = h if "cost_kv_per_query_head" in on else g
    tensors = 1 if "cost_kv_no_factor_two" in on else 2
    size = 1 if "cost_elements_not_bytes" in on else bytes_per_elem
    return tensors * b * t * n_layers * heads * d_k * size


def score_bytes(b, h, s_q, s_k, bytes_per_elem, bugs=None):
    on = _bugs(bugs)
    heads = 1 if "cost_scores_without_heads" in on else h
    size = 1 if "cost_elements_not_bytes" in on else bytes_per_elem
    return b * heads * s_q * s_k * size
