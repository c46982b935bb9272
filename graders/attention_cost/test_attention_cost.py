"""Hidden suite: attention_cost — exact shapes, parameter, FLOP and byte counts of one attention layer (python
track: plain functions, answers as Python values).

Each function is checked over seeded random configurations (h from 1 to 32 with d_k from 1 to 128, so h = d
and h = 1 both occur; every g dividing h, MQA g = 1 and MHA g = h included; s = 1; bias on and off), with
points per function; edge tests pin the corner configurations, the default ``bias=True`` and counts far beyond
64 bits. A count must be an exact Python int (a float, a NumPy integer or a bool fails, saying so).
"""

import pytest

from graders.common.cost import check_calls, config

grade = pytest.mark.grade


def _configs(rng, n: int, **fixed) -> list[dict]:
    return [config(rng, **fixed) for _ in range(n)]


def _corners(rng) -> list[dict]:
    """h = 1, h = d (d_k = 1), s = 1, b = 1, MQA (g = 1), MHA (g = h), bias off and on."""
    return [config(rng, h=1, bias=True), config(rng, h=8, d_k=1, bias=True), config(rng, s=1, s_q=1, t=1),
            config(rng, b=1), config(rng, h=8, g=1, bias=True), config(rng, h=12, g=12, bias=False),
            config(rng, h=16, d_k=1, g=16, s=1, b=1, bias=False)]


# -- shape ----------------------------------------------------------------------------------------------
@grade("shape", points=2)
def test_shapes(candidate, rng, record):
    """shapes(b, s, d, h): the twelve tensors of one MHA forward pass, exact tuples (random sizes and corners)."""
    check_calls(candidate, record, "shapes", [config(rng, b=2, s=5, h=4, d_k=4)] + _configs(rng, 5)
                + _corners(rng)[:4])


# -- numeric: one test per function -----------------------------------------------------------------------
@grade("numeric", points=2)
def test_params(candidate, rng, record):
    """params(d, h, bias): MHA parameters, with and without biases, for several h at the same d and others."""
    same_d = [config(rng, h=h, d=96, bias=bias) for h in (1, 3, 8, 32) for bias in (True, False)]
    check_calls(candidate, record, "params", [config(rng, h=8, d=512, bias=False)] + same_d + _configs(rng, 4))


@grade("numeric", points=2)
def test_gqa_params(candidate, rng, record):
    """gqa_params(d, h, g, bias): GQA parameters for MQA (g = 1), MHA (g = h) and groups in between."""
    cases = [config(rng, h=8, d=512, g=g, bias=bias) for g in (1, 2, 8) for bias in (True, False)]
    check_calls(candidate, record, "gqa_params", cases + _configs(rng, 4))


@grade("numeric", points=2)
def test_flops(candidate, rng, record):
    """flops(b, s, d, h): one self-attention forward pass, multiply-add = 2 FLOPs."""
    check_calls(candidate, record, "flops", [config(rng, b=1, s=1024, h=8, d=512)] + _configs(rng, 7))


@grade("numeric", points=2)
def test_cross_flops(candidate, rng, record):
    """cross_flops(b, s_q, s_k, d, h): queries from s_q tokens, keys and values from s_k (s_q != s_k, s_q = 1)."""
    cases = [config(rng, s_q=1), config(rng, s_q=7, s_k=300), config(rng, s_q=300, s_k=7)]
    check_calls(candidate, record, "cross_flops", cases + _configs(rng, 5))


@grade("numeric", points=2)
def test_kv_cache_bytes(candidate, rng, record):
    """kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem): K and V for t positions, g groups per layer."""
    cases = [config(rng, h=32, g=g) for g in (1, 4, 32)]
    check_calls(candidate, record, "kv_cache_bytes", cases + _configs(rng, 5))


@grade("numeric", points=1)
def test_score_bytes(candidate, rng, record):
    """score_bytes(b, h, s_q, s_k, bytes_per_elem): one (b, h, s_q, s_k) score tensor."""
    check_calls(candidate, record, "score_bytes", [config(rng, h=4, s_q=9, s_k=9)] + _configs(rng, 5))


# -- edge -----------------------------------------------------------------------------------------------
@grade("edge", points=0.5)
@pytest.mark.parametrize("function", ["shapes", "params", "gqa_params", "flops", "cross_flops", "kv_cache_bytes",
                                      "score_bytes"])
def test_corner_configurations(candidate, rng, record, function):
    """h = 1, h = d, s = 1, b = 1, MQA (g = 1) and MHA (g = h), bias on and off."""
    check_calls(candidate, record, function, _corners(rng))


@grade("edge", points=0.5, visibility="hidden")
@pytest.mark.parametrize("function", ["params", "gqa_params", "flops", "cross_flops", "kv_cache_bytes",
                                      "score_bytes"])
def test_big_integers(candidate, rng, record, function):
    """Counts far beyond 64 bits come back exact (Python ints do not overflow; floats would round)."""
    check_calls(candidate, record, function, _configs(rng, 3, big=True))


@grade("edge", points=0.5)
@pytest.mark.parametrize("function", ["params", "gqa_params"])
def test_bias_defaults_to_true(candidate, rng, record, function):
    """Without the keyword, bias=True: the count includes the biases."""
    cases = [dict(config(rng), bias=None) for _ in range(3)]
    check_calls(candidate, record, function, cases)
