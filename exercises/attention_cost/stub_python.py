"""Exercise `attention_cost`, python track: the cost of one attention layer, counted exactly.

Implement the seven functions below in plain Python (no NumPy or torch needed). Grade the file with:
    grade attention_cost <this file>

Notation: b batch rows, s tokens (s_q queries, s_k keys/values), d model width, h query heads, d_k = d / h
(d is divisible by h), g key/value groups (h is divisible by g; g = h is MHA, g = 1 is MQA).

What every function must return:
    * counts (parameters, FLOPs, bytes) as exact Python ``int`` values, however large (Python ints do not
      overflow): not a float (d / h is a float in Python; d // h is not), not a NumPy integer, not a bool;
    * shapes as tuples of Python ints.

The counting conventions (the README states them in full):
    * One forward pass of standard multi-head self-attention: Q = X W_q, K = X W_k, V = X W_v, split into h
      heads of width d_k, per head softmax(Q_i K_iᵀ / sqrt(d_k)) V_i, heads merged, output = merged W_o.
      W_q, W_k, W_v, W_o are (d, d) matrices; with biases each projection also has a bias vector of its
      output width. GQA: W_k and W_v produce g heads of width d_k, shared by groups of h / g query heads.
    * FLOPs: a multiply-add counts as 2 FLOPs; count the four projections and the two matrix products of
      attention (the scores Q·Kᵀ and weights·V); do not count the softmax, the scaling, the mask or the bias
      additions.
    * Bytes: the number of elements times ``bytes_per_elem``.
"""


def shapes(b, s, d, h):
    """The shapes of one MHA forward pass: a dict with exactly the keys
    X, Q, K, V, Q_heads, K_heads, V_heads, scores, weights, context, merged, output -> tuple of ints.
    X is the input; Q, K, V the projections before the split; *_heads after the split; scores = Q·Kᵀ / sqrt(d_k)
    per head; weights = softmax(scores); context = weights·V per head; merged = the heads merged back;
    output = merged W_o."""
    raise NotImplementedError("implement shapes(b, s, d, h)")


def params(d, h, bias=True):
    """The number of parameters of one MHA layer (W_q, W_k, W_v, W_o and, when ``bias``, their biases)."""
    raise NotImplementedError("implement params(d, h, bias=True)")


def gqa_params(d, h, g, bias=True):
    """The number of parameters of one GQA layer with h query heads and g key/value groups."""
    raise NotImplementedError("implement gqa_params(d, h, g, bias=True)")


def flops(b, s, d, h):
    """The FLOPs of one MHA self-attention forward pass over (b, s, d) inputs."""
    raise NotImplementedError("implement flops(b, s, d, h)")


def cross_flops(b, s_q, s_k, d, h):
    """The FLOPs of one cross-attention forward pass: queries from (b, s_q, d), keys and values from (b, s_k, d)."""
    raise NotImplementedError("implement cross_flops(b, s_q, s_k, d, h)")


def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem):
    """The bytes a KV cache holds for t positions of b sequences over n_layers layers, each with h query
    heads and g key/value groups of width d_k."""
    raise NotImplementedError("implement kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem)")


def score_bytes(b, h, s_q, s_k, bytes_per_elem):
    """The bytes of one attention score tensor for b sequences, h heads, s_q queries and s_k keys."""
    raise NotImplementedError("implement score_bytes(b, h, s_q, s_k, bytes_per_elem)")
