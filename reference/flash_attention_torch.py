"""Reference solution: flash attention (keys in blocks, online softmax), PyTorch track: a differentiable
function over tensors (autograd differentiates the loop; the memory bound is for a forward without grad)."""

import math

import torch


def flash_attention(Q, K, V, block_size=64, causal=False):
    B, nh, Tq, hs = Q.shape                                          # (B, nh, Tq, hs)
    Tk = K.shape[2]                                                  # K, V: (B, nh, Tk, hs)
    q = Q * (1.0 / math.sqrt(hs))                                    # (B, nh, Tq, hs) scaled once
    m = Q.new_full((B, nh, Tq, 1), float("-inf"))                    # (B, nh, Tq, 1) running max
    l = Q.new_zeros((B, nh, Tq, 1))                                  # (B, nh, Tq, 1) running sum of exp
    acc = Q.new_zeros((B, nh, Tq, hs))                               # (B, nh, Tq, hs) running sum of exp * V
    stop = min(Tk, Tq) if causal else Tk                             # causal: no query sees a key at Tq or later
    for start in range(0, stop, block_size):
        first = start if causal else 0                               # causal: queries before `start` see no key here
        kb = K[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        vb = V[:, :, start:start + block_size]                       # (B, nh, Bk, hs)
        s = q[:, :, first:] @ kb.transpose(-2, -1)                   # (B, nh, Tr, Bk) the Tr = Tq - first rows
        if causal:                                                   # top-left: query i sees keys j <= i
            cols = torch.arange(start, start + kb.shape[2], device=Q.device)[None, :]  # (1, Bk) key positions
            rows = torch.arange(first, Tq, device=Q.device)[:, None]  # (Tr, 1) query positions
            s.masked_fill_(cols > rows, float("-inf"))               # (B, nh, Tr, Bk)
        m_old = m[:, :, first:]                                      # (B, nh, Tr, 1)
        m_new = torch.maximum(m_old, s.detach().amax(dim=-1, keepdim=True))  # (B, nh, Tr, 1) a shift: no gradient
        safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)         # (B, nh, Tr, 1) rows with no key yet
        p = s.sub_(safe).exp_()                                      # (B, nh, Tr, Bk) in place: one tile alive
        alpha = torch.exp(m_old - safe)                              # (B, nh, Tr, 1) rescales the old sums
        l_new = alpha * l[:, :, first:] + p.sum(dim=-1, keepdim=True)  # (B, nh, Tr, 1)
        acc_new = alpha * acc[:, :, first:] + p @ vb                 # (B, nh, Tr, hs)
        if first:                                                    # rows before `first` keep their sums
            m_new, l_new, acc_new = (torch.cat([t[:, :, :first], new], dim=2)
                                     for t, new in ((m, m_new), (l, l_new), (acc, acc_new)))
        m, l, acc = m_new, l_new, acc_new                            # (B, nh, Tq, 1), (B, nh, Tq, 1), (B, nh, Tq, hs)
    return acc / l                                                   # (B, nh, Tq, hs)
