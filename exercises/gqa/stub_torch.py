"""Exercise `gqa`, PyTorch track: grouped-query attention as an nn.Module.

Implement `GroupedQueryAttention` below with plain tensor operations. Grade it with:  grade gqa <this file>
"""

import math  # noqa: F401  (you will probably want math.sqrt)

import torch  # noqa: F401
from torch import nn


class GroupedQueryAttention(nn.Module):
    """Grouped-query self-attention: n_heads query heads share n_kv_heads key/value heads ("groups").

    __init__(d_model, n_heads, n_kv_heads, bias=True)   (first three positional; bias by keyword)
        d_model = d, divisible by n_heads = h; d_k = d / h; n_kv_heads = g divides h
        (g = h is MHA, g = 1 is MQA).
        Parameters (the grader loads its weights into them by name):
          self.w_q = nn.Linear(d, d, bias=bias)          -> h query heads
          self.w_k = nn.Linear(d, g * d_k, bias=bias)    -> g key heads
          self.w_v = nn.Linear(d, g * d_k, bias=bias)    -> g value heads
          self.w_o = nn.Linear(d, d, bias=bias)
        No other parameters: exactly 2d^2 + 2d*g*d_k, plus 2d + 2g*d_k with bias.

    forward(x, mask=None)   (x positional; mask by keyword)
        x     (b, s, d) tensor, float32 or float64 (float64 tests call module.to(torch.float64)).
        mask  None, or a bool tensor broadcastable to (b, h, s, s) — e.g. (s, s), (b, 1, 1, s),
              (b, 1, s, s) or (b, h, s, s). True means the query may NOT attend to that key.
        returns (b, s, d), same dtype as x.

    Conventions the grader checks:
        * Query head i is features i*d_k:(i+1)*d_k of w_q(x); group j is features j*d_k:(j+1)*d_k of
          w_k(x) and w_v(x). Query head i reads group i // (h // g): consecutive query heads share a group
          (repeat_interleave order, as in Llama; NOT .repeat / tile order).
        * Per head: softmax(q_i k_j^T / sqrt(d_k)) v_j over the keys (last dim), stable for large scores;
          contexts concatenated in query-head order before w_o.
        * A query row whose keys are ALL masked gets a zero context vector for that head (so that output
          row equals w_o's bias): no NaN, not the mean of v, and gradients through it stay finite.
        * Gradients flow to x and to every parameter; train() and eval() give the same output (no dropout).
        * Output dtype equals the input dtype. Do not modify x, the mask or the weights in place.
        * x may be a non-contiguous view (transposed or strided).
        * Implement attention yourself: the built-in attention function of torch.nn.functional and
          torch.nn's ready-made multi-head attention module are not allowed.
    """

    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        raise NotImplementedError(
            "implement GroupedQueryAttention.__init__(d_model, n_heads, n_kv_heads, bias=True)")

    def forward(self, x, mask=None):
        raise NotImplementedError("implement GroupedQueryAttention.forward(x, mask=None)")
