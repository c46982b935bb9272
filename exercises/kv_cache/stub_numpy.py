"""Exercise `kv_cache`, NumPy track: grouped-query attention with a KV cache (incremental decoding).

Implement `kv_attention` below using NumPy only. Grade it with:  grade kv_cache <this file>
"""

import numpy as np


def kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None):
    """Causal grouped-query self-attention over new tokens, with a cache of the keys and values seen so far.

    Arguments (positional, in this order; ``cache`` is passed by keyword):
        X      (b, s_new, d)    the NEW tokens only: b batch rows, s_new tokens, d features.
        Wq     (d, d)           query projection:  Q = X @ Wq  -> h heads of d_k = d / h columns.
        Wk     (d, g * d_k)     key projection:    K = X @ Wk  -> g key heads ("groups") of d_k columns.
        Wv     (d, g * d_k)     value projection:  V = X @ Wv  -> g value heads of d_k columns.
        Wo     (d, d)           output projection: out = context @ Wo.
        h      int              number of query heads; d is divisible by h and d_k = d / h.
        g      int              number of key/value groups; h is divisible by g.
        cache  None (prefill: there is no prefix yet), or a pair (K, V) of arrays, each (b, g, t0, d_k):
               the keys and values of the t0 tokens processed so far, group j in K[:, j].

    Returns:
        (out, (K, V)):
        out    (b, s_new, d)          the output after Wo for the new tokens, in the dtype of X.
        K, V   (b, g, t0 + s_new, d_k) each: the cache extended by the new tokens' keys and values (prefix first),
               in the dtype of X. Pass it back as ``cache`` with the next tokens.

    Conventions the grader checks:
        * New token i sits at position t0 + i: it attends to every cached key and, among the new tokens, to
          itself and the earlier ones (causal), never to later ones. No other mask.
        * Query head i reads group i // (h // g) (np.repeat order, as in gqa). The cache holds the g groups,
          NOT the h repeated heads (that is the point of GQA: a cache h / g times smaller than MHA's).
        * softmax(Q_i K_j^T / sqrt(d_k)) V_j over the keys, stable for large scores.
        * Splitting a sequence into chunks (a prefill, then one or more tokens per call) and concatenating the
          outputs gives exactly causal GQA over the whole sequence.
        * Do not modify any argument in place, the input cache included: return a new cache.
        * A cache whose batch size is not X's must be rejected with an error (raise), never used.
    """
    raise NotImplementedError("implement kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None)")
