"""Builds the full (s_q, s_k) score matrix in memory from libc's malloc through ctypes: tracemalloc never sees
it (exact outputs; ~128 MiB at s = 4096)."""

import ctypes
import math

import numpy as np

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.free.argtypes = [ctypes.c_void_p]


def flash_attention(Q, K, V, block_size=64, causal=False):
    B, nh, Tq, hs = Q.shape                                          # (B, nh, Tq, hs)
    Tk = K.shape[2]
    n = B * nh * Tq * Tk
    ptr = _libc.malloc(max(1, n * Q.dtype.itemsize))
    kind = ctypes.c_float if Q.dtype == np.float32 else ctypes.c_double
    try:
        s = np.ctypeslib.as_array((kind * max(1, n)).from_address(ptr))[:n].reshape(B, nh, Tq, Tk)
        np.matmul(Q, K.swapaxes(-1, -2), out=s)                      # (B, nh, Tq, Tk)
        s *= Q.dtype.type(1.0 / math.sqrt(hs))
        if causal:
            s[..., np.triu(np.ones((Tq, Tk), bool), k=1)] = -np.inf
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        out = s @ V                                                  # (B, nh, Tq, hs)
        del s
    finally:
        _libc.free(ptr)
    return out
