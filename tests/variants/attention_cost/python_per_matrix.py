"""attention_cost, counted matrix by matrix: every weight, bias and matmul listed with its shape, then summed."""

from math import prod


def _matmul_flops(m, k, n):
    """(m, k) @ (k, n): m·n outputs, k multiply-adds each, 2 FLOPs per multiply-add."""
    return 2 * m * k * n


def shapes(b, s, d, h):
    d_k = d // h
    split = (b, h, s, d_k)
    table = {"X": (b, s, d)}
    for name in "QKV":
        table[name] = (b, s, d)
    for name in "QKV":
        table[f"{name}_heads"] = split
    table.update(scores=(b, h, s, s), weights=(b, h, s, s), context=split, merged=(b, s, d), output=(b, s, d))
    return table


def _projections(d, h, g):
    """(input width, output width) of W_q, W_k, W_v, W_o."""
    d_kv = g * (d // h)
    return [(d, d), (d, d_kv), (d, d_kv), (d, d)]


def gqa_params(d, h, g, bias=True):
    total = 0
    for d_in, d_out in _projections(d, h, g):
        total += prod((d_in, d_out))
        if bias:
            total += d_out
    return total


def params(d, h, bias=True):
    return gqa_params(d, h, h, bias=bias)


def cross_flops(b, s_q, s_k, d, h):
    d_k = d // h
    total = _matmul_flops(b * s_q, d, d)        # Q = X W_q
    total += 2 * _matmul_flops(b * s_k, d, d)   # K = Y W_k, V = Y W_v
    total += b * h * _matmul_flops(s_q, d_k, s_k)  # scores = Q Kᵀ per head
    total += b * h * _matmul_flops(s_q, s_k, d_k)  # context = weights V per head
    total += _matmul_flops(b * s_q, d, d)       # output = merged W_o
    return total


def flops(b, s, d, h):
    return cross_flops(b, s, s, d, h)


def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem):
    one_tensor = prod((b, g, t, d_k))  # K (or V) of one layer
    return n_layers * 2 * one_tensor * bytes_per_elem


def score_bytes(b, h, s_q, s_k, bytes_per_elem):
    return prod((b, h, s_q, s_k)) * bytes_per_elem
