"""Exercise `masked_mha`, NumPy track: multi-head self-attention under a required mask.

Implement `masked_mha` below using NumPy only. Grade it with:  grade masked_mha <this file>
"""

import numpy as np


def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    """Masked multi-head self-attention.

    Arguments (all positional, in this order; the mask is required):
        X     (b, s, d)  the input sequence: b batch rows, s tokens, d features.
        Wq    (d, d)     query projection:  Q = X @ Wq   (right-multiplication, W is (d_in, d_out)).
        Wk    (d, d)     key projection:    K = X @ Wk.
        Wv    (d, d)     value projection:  V = X @ Wv.
        Wo    (d, d)     output projection: out = context @ Wo.
        h     int        number of heads; d is divisible by h and d_k = d / h.
        mask  bool array broadcastable to (b, h, s, s). True means the query may NOT attend to that key.
              The grader uses causal masks (s, s) (True strictly above the diagonal: a token sees itself
              and the past), key-padding masks (b, 1, 1, s), per-query masks (b, 1, s, s), per-head masks
              (b, h, s, s), and combinations of them (logical OR).

    Returns:
        (b, s, d) array: the output after Wo, in the dtype of X.

    Conventions the grader checks:
        * Head i uses columns i*d_k:(i+1)*d_k of Q, K and V; the heads' contexts are concatenated back in
          the same order before the output projection.
        * Per head: softmax(Q_i K_i^T / sqrt(d_k) with masked scores excluded) V_i, softmax over the keys
          (last axis), numerically stable for large scores.
        * Masked keys get exactly zero weight: changing a masked key's token changes nothing, and under a
          causal mask changing a future token leaves earlier outputs unchanged.
        * A query row whose keys are ALL masked gets a zero context vector for that head: no NaN, and not
          the mean of V (a -1e9 fill alone gives the mean of V). With no bias, that output row is 0.
        * Output dtype equals the input dtype (float32 in -> float32 out, float64 in -> float64 out).
        * Do not modify any argument in place (X, the weights or the mask).
        * Inputs may be non-contiguous (Fortran-ordered or strided views).
    """
    raise NotImplementedError("implement masked_mha(X, Wq, Wk, Wv, Wo, h, mask)")
