"""Exercise `mha`, PyTorch track: multi-head self-attention as an nn.Module.

Implement `MultiHeadAttention` below with plain tensor operations. Grade it with:  grade mha <this file>
"""

import math  # noqa: F401  (you will probably want math.sqrt)

import torch  # noqa: F401
from torch import nn


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention.

    __init__(d_model, n_heads, bias=True)   (d_model, n_heads positional; bias by keyword)
        d_model = d, divisible by n_heads = h; d_k = d / h.
        Parameters, in ONE of these two layouts (the grader loads its weights into them by name):
          * separate: self.w_q, self.w_k, self.w_v, self.w_o, each nn.Linear(d, d, bias=bias); or
          * fused:    self.qkv = nn.Linear(d, 3 * d, bias=bias) (output rows Q, K, V in that order)
                      plus self.w_o (or self.wo) = nn.Linear(d, d, bias=bias).
        No other parameters: exactly 4d^2 + 4d with bias, 4d^2 without.

    forward(x, mask=None)   (x positional; mask by keyword)
        x     (b, s, d) tensor, float32 or float64 (float64 tests call module.to(torch.float64)).
        mask  None, or a bool tensor broadcastable to (b, h, s, s) — e.g. (s, s), (b, 1, 1, s),
              (b, 1, s, s) or (b, h, s, s). True means the query may NOT attend to that key.
        returns (b, s, d), same dtype as x: w_o applied to the concatenated heads' contexts.

    Conventions the grader checks:
        * Head i uses features i*d_k:(i+1)*d_k of the projected q, k and v, and its context goes back to
          the same columns before w_o.
        * Per head: softmax(q_i k_i^T / sqrt(d_k)) v_i over the keys (last dim); stable for large scores.
        * A query row whose keys are ALL masked gets a zero context vector for that head (so that output
          row equals w_o's bias): no NaN, not the mean of v, and gradients through it stay finite.
        * Gradients flow to x and to every parameter; train() and eval() give the same output (no dropout).
        * Output dtype equals the input dtype. Do not modify x, the mask or the weights in place.
        * x may be a non-contiguous view (transposed or strided).
        * Implement attention yourself: the built-in attention function of torch.nn.functional and
          torch.nn's ready-made multi-head attention module are not allowed.
    """

    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        raise NotImplementedError("implement MultiHeadAttention.__init__(d_model, n_heads, bias=True)")

    def forward(self, x, mask=None):
        raise NotImplementedError("implement MultiHeadAttention.forward(x, mask=None)")
