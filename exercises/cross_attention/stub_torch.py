"""Exercise `cross_attention`, PyTorch track: cross-attention as an nn.Module.

Implement `CrossAttention` below with plain tensor operations. Grade it with:
    grade cross_attention <this file>
"""

import math  # noqa: F401  (you will probably want math.sqrt)

import torch  # noqa: F401
from torch import nn


class CrossAttention(nn.Module):
    """Multi-head cross-attention: queries from x, keys and values from context.

    __init__(d_model, n_heads, bias=True)   (d_model, n_heads positional; bias by keyword)
        d_model = d, divisible by n_heads = h; d_k = d / h.
        Parameters: self.w_q, self.w_k, self.w_v, self.w_o, each nn.Linear(d, d, bias=bias)
        (the grader loads its weights into them by name; a fused qkv does not fit here, because q comes
        from a different sequence than k and v). No other parameters: exactly 4d^2 + 4d with bias,
        4d^2 without.

    forward(x, context, mask=None)   (x, context positional; mask by keyword)
        x        (b, s_q, d) tensor: the queries' sequence.
        context  (b, s_k, d) tensor: supplies keys and values; s_k may differ from s_q (either way) and
                 may be 1. Both are float32 or float64 (float64 tests call module.to(torch.float64)).
        mask     None, or a bool tensor broadcastable to (b, h, s_q, s_k) — e.g. a key-padding mask
                 (b, 1, 1, s_k), or (s_q, s_k), (b, 1, s_q, s_k), (b, h, s_q, s_k).
                 True means the query may NOT attend to that key.
        returns (b, s_q, d), same dtype as x.

    Conventions the grader checks:
        * q = w_q(x); k = w_k(context); v = w_v(context). The output depends on x only through q.
        * Head i uses features i*d_k:(i+1)*d_k of q, k and v, and its context goes back to the same
          columns before w_o. Scores per head are (s_q, s_k); softmax over the keys (last dim), stable for
          large scores.
        * A query row whose keys are ALL masked gets a zero context vector for that head (so that output
          row equals w_o's bias): no NaN, not the mean of v, and gradients through it stay finite.
        * Gradients flow to x, to context and to every parameter; train() and eval() give the same output.
        * Output dtype equals the input dtype. Do not modify x, context, the mask or the weights in place.
        * x and context may be non-contiguous views (transposed or strided).
        * Implement attention yourself: the built-in attention function of torch.nn.functional and
          torch.nn's ready-made multi-head attention module are not allowed.
    """

    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        raise NotImplementedError("implement CrossAttention.__init__(d_model, n_heads, bias=True)")

    def forward(self, x, context, mask=None):
        raise NotImplementedError("implement CrossAttention.forward(x, context, mask=None)")
