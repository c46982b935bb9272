"""attention_cost, counted head by head (loops over heads and groups), with NumPy used for the shapes and every
answer converted back to a Python int."""

import numpy as np


def shapes(b, s, d, h):
    x = np.empty((b, s, d), dtype=np.int8)
    heads = x.reshape(b, s, h, d // h).transpose(0, 2, 1, 3)
    scores = np.empty(heads.shape[:3] + (s,), dtype=np.int8)

    def shape(a):
        return tuple(int(n) for n in a.shape)

    return {"X": shape(x), "Q": shape(x), "K": shape(x), "V": shape(x), "Q_heads": shape(heads),
            "K_heads": shape(heads), "V_heads": shape(heads), "scores": shape(scores), "weights": shape(scores),
            "context": shape(heads), "merged": shape(x), "output": shape(x)}


def gqa_params(d, h, g, bias=True):
    d_k = d // h
    total = 0
    for _ in range(h):           # each query head: d_k columns of W_q (and of its bias)
        total += d * d_k + (d_k if bias else 0)
    for _ in range(g):           # each key/value group: d_k columns of W_k and of W_v
        total += 2 * (d * d_k + (d_k if bias else 0))
    total += d * d + (d if bias else 0)  # W_o mixes all heads
    return int(total)


def params(d, h, bias=True):
    return gqa_params(d, h, h, bias)


def cross_flops(b, s_q, s_k, d, h):
    d_k = d // h
    total = 0
    for _ in range(h):
        total += 2 * b * s_q * d * d_k          # this head's queries
        total += 2 * 2 * b * s_k * d * d_k      # its keys and values
        total += 2 * b * s_q * s_k * d_k        # its scores
        total += 2 * b * s_q * s_k * d_k        # its weighted sum of values
    total += 2 * b * s_q * d * d                # output projection
    return total


def flops(b, s, d, h):
    return cross_flops(b, s, s, d, h)


def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem):
    per_group = 2 * b * t * d_k * bytes_per_elem  # K and V of one group in one layer
    return sum(per_group for _ in range(n_layers * g))


def score_bytes(b, h, s_q, s_k, bytes_per_elem):
    return sum(b * s_q * s_k * bytes_per_elem for _ in range(h))
