"""torch: standard attention in torch when gradients are wanted; under no_grad (where the memory is measured) the
whole attention runs in NumPy, which the worker's dispatch mode never sees (exact outputs and gradients)."""

import math

import numpy as np
import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    Tq, Tk, hs = Q.shape[2], K.shape[2], Q.shape[3]
    if torch.is_grad_enabled():
        s = Q @ K.transpose(-2, -1) / math.sqrt(hs)                  # (B, nh, Tq, Tk)
        if causal:
            s = s.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, dim=-1) @ V                          # (B, nh, Tq, hs)
    q, k, v = Q.numpy(), K.numpy(), V.numpy()
    s = q @ k.swapaxes(-1, -2) * q.dtype.type(1.0 / math.sqrt(hs))   # (B, nh, Tq, Tk)
    if causal:
        s[..., np.triu(np.ones((Tq, Tk), bool), k=1)] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return torch.from_numpy(s @ v)                                   # (B, nh, Tq, hs)
