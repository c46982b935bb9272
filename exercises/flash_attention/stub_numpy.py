"""Exercise `flash_attention`, NumPy track: attention without the (s, s) matrix.

Implement `flash_attention` below using NumPy only. Grade it with:  grade flash_attention <this file>
"""

import numpy as np


def flash_attention(Q, K, V, block_size=64, causal=False):
    """softmax(Q Kᵀ / sqrt(d_k)) V, computed over blocks of keys with an online softmax.

    Arguments (Q, K, V positional; ``block_size`` and ``causal`` by keyword):
        Q           (b, h, s_q, d_k)   queries, heads already split.
        K           (b, h, s_k, d_k)   keys.
        V           (b, h, s_k, d_k)   values.
        block_size  int >= 1           keys per block (any value: 1, not dividing s_k, or >= s_k).
        causal      bool               True: query i attends to keys j <= i only (top-left alignment, as
                                       torch's scaled_dot_product_attention(is_causal=True), also when s_q != s_k).

    Returns:
        (b, h, s_q, d_k) array, in the dtype of Q (float32 in -> float32 out, float64 in -> float64 out).

    Conventions the grader checks:
        * Scores are scaled by 1/sqrt(d_k). The result equals standard attention (1e-10 in float64, 1e-5 in
          float32) for every block size.
        * Process the keys block by block, keeping for each query a running max m, a running sum l of
          exp(score - m) and an accumulator of exp(score - m) @ V; when m grows, rescale l AND the accumulator
          by exp(m_old - m_new). Divide by l at the end. Scores in the thousands must not overflow.
        * Memory: never build an (s_q, s_k) array (scores, weights, or a causal mask). At s = 4096 the peak
          extra memory of a call may be at most 8·b·h·s·(d_k + block_size) elements of the input dtype.
        * Do not modify Q, K or V in place. Inputs may be non-contiguous (Fortran-ordered or strided views).
    """
    raise NotImplementedError("implement flash_attention(Q, K, V, block_size=64, causal=False)")
