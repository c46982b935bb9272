"""Exercise `mha`, NumPy track: multi-head self-attention.

Implement `mha` below using NumPy only. Grade it with:  grade mha <this file>
"""

import numpy as np


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    """Multi-head self-attention.

    Arguments (positional, in this order; ``mask`` is passed by keyword):
        X     (b, s, d)  the input sequence: b batch rows, s tokens, d features.
        Wq    (d, d)     query projection:  Q = X @ Wq   (right-multiplication, W is (d_in, d_out)).
        Wk    (d, d)     key projection:    K = X @ Wk.
        Wv    (d, d)     value projection:  V = X @ Wv.
        Wo    (d, d)     output projection: out = context @ Wo.
        h     int        number of heads; d is divisible by h and d_k = d / h.
        mask  None, or a bool array broadcastable to (b, h, s, s) — e.g. (s, s), (b, 1, 1, s),
              (b, 1, s, s) or (b, h, s, s). True means the query may NOT attend to that key.

    Returns:
        (b, s, d) array: the output after Wo, in the dtype of X.

    Conventions the grader checks:
        * Head i uses columns i*d_k:(i+1)*d_k of Q, K and V; the heads' contexts are concatenated back in
          the same order (head i -> columns i*d_k:(i+1)*d_k) before the output projection.
        * Per head: softmax(Q_i K_i^T / sqrt(d_k)) V_i, softmax over the keys (last axis), numerically
          stable for large scores (scores in the thousands must not overflow).
        * A query row whose keys are ALL masked gets a zero context vector for that head: no NaN, and not
          the mean of V. With no bias, that row of the output is 0.
        * Output dtype equals the input dtype (float32 in -> float32 out, float64 in -> float64 out).
        * Do not modify any argument in place (X, the weights or the mask).
        * Inputs may be non-contiguous (Fortran-ordered or strided views).
    """
    raise NotImplementedError("implement mha(X, Wq, Wk, Wv, Wo, h, mask=None)")
