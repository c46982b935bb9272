"""Model answer for `attention_cost` (python track): closed forms, exact ints."""


def shapes(b, s, d, h):
    d_k = d // h
    full, heads, scores = (b, s, d), (b, h, s, d_k), (b, h, s, s)
    return {"X": full, "Q": full, "K": full, "V": full, "Q_heads": heads, "K_heads": heads, "V_heads": heads,
            "scores": scores, "weights": scores, "context": heads, "merged": full, "output": full}


def params(d, h, bias=True):
    # W_q, W_k, W_v, W_o: (d, d) each; biases d each. The head count only splits the columns.
    return 4 * d * d + (4 * d if bias else 0)


def gqa_params(d, h, g, bias=True):
    d_kv = g * (d // h)  # the width of K and V: g groups of d_k
    weights = 2 * d * d + 2 * d * d_kv
    return weights + ((2 * d + 2 * d_kv) if bias else 0)


def flops(b, s, d, h):
    # projections: 4 matmuls (b·s, d) x (d, d) -> 4 · 2·b·s·d²; attention: Q·Kᵀ and weights·V, each
    # 2·b·h·s·s·d_k = 2·b·s²·d
    return 8 * b * s * d * d + 4 * b * s * s * d


def cross_flops(b, s_q, s_k, d, h):
    # W_q and W_o over the s_q query tokens, W_k and W_v over the s_k context tokens
    return 4 * b * s_q * d * d + 4 * b * s_k * d * d + 4 * b * s_q * s_k * d


def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem):
    # K and V, each (b, g, t, d_k) per layer; the h query heads share the g groups
    return 2 * b * t * n_layers * g * d_k * bytes_per_elem


def score_bytes(b, h, s_q, s_k, bytes_per_elem):
    return b * h * s_q * s_k * bytes_per_elem
