"""attention_cost, closed forms written out (d_k cancels wherever h·d_k = d)."""


def shapes(b, s, d, h):
    dk = d // h
    return dict(X=(b, s, d), Q=(b, s, d), K=(b, s, d), V=(b, s, d),
                Q_heads=(b, h, s, dk), K_heads=(b, h, s, dk), V_heads=(b, h, s, dk),
                scores=(b, h, s, s), weights=(b, h, s, s), context=(b, h, s, dk),
                merged=(b, s, d), output=(b, s, d))


def params(d, h, bias=True):
    return 4 * d ** 2 + 4 * d * bias


def gqa_params(d, h, g, bias=True):
    kv = g * d // h
    return 2 * d ** 2 + 2 * d * kv + int(bias) * (2 * d + 2 * kv)


def flops(b, s, d, h):
    return 8 * b * s * d ** 2 + 4 * b * s ** 2 * d


def cross_flops(b, s_q, s_k, d, h):
    return 4 * b * d ** 2 * (s_q + s_k) + 4 * b * s_q * s_k * d


def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem):
    return 2 * b * t * n_layers * g * d_k * bytes_per_elem


def score_bytes(b, h, s_q, s_k, bytes_per_elem):
    return b * h * s_q * s_k * bytes_per_elem
