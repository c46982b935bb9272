"""Exercise `gqa`, NumPy track: grouped-query attention.

Implement `gqa` below using NumPy only. Grade it with:  grade gqa <this file>
"""

import numpy as np


def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):
    """Grouped-query self-attention: h query heads share g key/value heads ("groups").

    Arguments (positional, in this order; ``mask`` is passed by keyword):
        X     (b, s, d)        the input sequence: b batch rows, s tokens, d features.
        Wq    (d, d)           query projection:  Q = X @ Wq  -> h heads of d_k = d / h columns.
        Wk    (d, g * d_k)     key projection:    K = X @ Wk  -> g key heads of d_k columns.
        Wv    (d, g * d_k)     value projection:  V = X @ Wv  -> g value heads of d_k columns.
        Wo    (d, d)           output projection: out = context @ Wo.
        h     int              number of query heads; d is divisible by h and d_k = d / h.
        g     int              number of key/value groups; h is divisible by g (g = h is MHA, g = 1 is MQA).
        mask  None, or a bool array broadcastable to (b, h, s, s) — e.g. (s, s), (b, 1, 1, s),
              (b, 1, s, s) or (b, h, s, s). True means the query may NOT attend to that key.

    Returns:
        (b, s, d) array: the output after Wo, in the dtype of X.

    Conventions the grader checks:
        * Query head i is columns i*d_k:(i+1)*d_k of Q; key/value group j is columns j*d_k:(j+1)*d_k of K
          and V. Query head i reads group i // (h // g): consecutive query heads share a group
          (np.repeat order, as in Llama; NOT np.tile order).
        * Per head: softmax(Q_i K_j^T / sqrt(d_k)) V_j over the keys (last axis), stable for large scores.
          The heads' contexts are concatenated back in query-head order (head i -> columns
          i*d_k:(i+1)*d_k) before the output projection.
        * A query row whose keys are ALL masked gets a zero context vector for that head: no NaN, and not
          the mean of V. With no bias, that row of the output is 0.
        * Output dtype equals the input dtype (float32 in -> float32 out, float64 in -> float64 out).
        * Do not modify any argument in place (X, the weights or the mask).
        * Inputs may be non-contiguous (Fortran-ordered or strided views).
    """
    raise NotImplementedError("implement gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None)")
