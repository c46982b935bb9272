"""Exercise `cross_attention`, NumPy track: queries from one sequence, keys and values from another.

Implement `cross_attention` below using NumPy only. Grade it with:  grade cross_attention <this file>
"""

import numpy as np


def cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None):
    """Multi-head cross-attention (e.g. a decoder attending to an encoder's output).

    Arguments (positional, in this order; ``mask`` is passed by keyword):
        X     (b, s_q, d)  the queries' sequence (s_q tokens).
        Y     (b, s_k, d)  the context that supplies keys and values (s_k tokens; s_k may differ from s_q,
                           either way, and may be 1).
        Wq    (d, d)       query projection:  Q = X @ Wq   (right-multiplication, W is (d_in, d_out)).
        Wk    (d, d)       key projection:    K = Y @ Wk.
        Wv    (d, d)       value projection:  V = Y @ Wv.
        Wo    (d, d)       output projection: out = context @ Wo.
        h     int          number of heads; d is divisible by h and d_k = d / h.
        mask  None, or a bool array broadcastable to (b, h, s_q, s_k) — e.g. a key-padding mask
              (b, 1, 1, s_k), or (s_q, s_k), (b, 1, s_q, s_k), (b, h, s_q, s_k).
              True means the query may NOT attend to that key.

    Returns:
        (b, s_q, d) array: the output after Wo, in the dtype of X.

    Conventions the grader checks:
        * The output depends on X only through Q, and on Y only through K and V.
        * Head i uses columns i*d_k:(i+1)*d_k of Q, K and V; the heads' contexts are concatenated back in
          the same order before the output projection.
        * Per head: softmax(Q_i K_i^T / sqrt(d_k)) V_i, with Q_i (b, s_q, d_k), K_i and V_i (b, s_k, d_k):
          scores are (s_q, s_k), softmax over the keys (last axis), numerically stable for large scores.
        * A query row whose keys are ALL masked gets a zero context vector for that head: no NaN, and not
          the mean of V. With no bias, that row of the output is 0.
        * Output dtype equals the input dtype (float32 in -> float32 out, float64 in -> float64 out).
        * Do not modify any argument in place (X, Y, the weights or the mask).
        * Inputs may be non-contiguous (Fortran-ordered or strided views).
    """
    raise NotImplementedError("implement cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None)")
