"""Exercise `kv_cache`, PyTorch track: grouped-query attention with a KV cache as an nn.Module.

Implement `KVCacheAttention` below with plain tensor operations. Grade it with:  grade kv_cache <this file>
"""

import math  # noqa: F401  (you will probably want math.sqrt)

import torch  # noqa: F401
from torch import nn


class KVCacheAttention(nn.Module):
    """Causal grouped-query self-attention over new tokens, with a cache of the keys and values seen so far.

    __init__(d_model, n_heads, n_kv_heads, bias=True)   (first three positional; bias by keyword)
        d_model = d, divisible by n_heads = h; d_k = d / h; n_kv_heads = g divides h.
        Parameters (the grader loads its weights into them by name), exactly as in the gqa exercise:
          self.w_q = nn.Linear(d, d, bias=bias)          -> h query heads
          self.w_k = nn.Linear(d, g * d_k, bias=bias)    -> g key heads ("groups")
          self.w_v = nn.Linear(d, g * d_k, bias=bias)    -> g value heads
          self.w_o = nn.Linear(d, d, bias=bias)
        No other parameters.

    forward(x, cache=None)   (x positional; cache by keyword)
        x      (b, s_new, d) tensor: the NEW tokens only, float32 or float64 (float64 tests call
               module.to(torch.float64)).
        cache  None (prefill), or a pair (K, V) of tensors, each (b, g, t0, d_k): the keys and values of the t0
               tokens processed so far, group j in K[:, j].
        returns (out, (K, V)): out (b, s_new, d); K, V (b, g, t0 + s_new, d_k) each, the cache extended by the
               new tokens (prefix first). Everything in x's dtype.

    Conventions the grader checks:
        * New token i sits at position t0 + i: it attends to every cached key and, among the new tokens, to
          itself and the earlier ones (causal), never to later ones.
        * Query head i reads group i // (h // g) (repeat_interleave order, as in gqa). The cache holds the g
          groups, NOT the h repeated heads.
        * softmax(q_i k_j^T / sqrt(d_k)) v_j over the keys, stable for large scores.
        * Chunks (a prefill, then one or more tokens per call), concatenated, give causal GQA over the sequence.
        * Do not modify x, the input cache or the weights in place: return a new cache.
        * A cache whose batch size is not x's must be rejected with an error (raise), never used.
        * Gradients flow from out to x and to every parameter (the cache is treated as a constant input);
          train() and eval() give the same output.
        * Implement attention yourself: the built-in attention function of torch.nn.functional and
          torch.nn's ready-made multi-head attention module are not allowed.
    """

    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        raise NotImplementedError("implement KVCacheAttention.__init__(d_model, n_heads, n_kv_heads, bias=True)")

    def forward(self, x, cache=None):
        raise NotImplementedError("implement KVCacheAttention.forward(x, cache=None)")
