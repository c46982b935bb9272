"""Shape-branching mutant: masked MHA (fused qkv) that, for B > 4, splits the batch in two halves and forgets the
mask for the second half. Right for every B <= 4."""

import math

import torch
from torch import nn


class MaskedMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _attend(self, x, mask):
        B, T, C = x.shape
        q, k, v = (t.reshape(B, T, self.n_heads, self.d_k).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            mask = mask.to(torch.bool).expand_as(scores)
            empty = mask.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(mask, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)
        return self.w_o((weights @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x, mask):
        B, T, _ = x.shape
        mask = mask.to(torch.bool).expand(B, self.n_heads, T, T)
        if B > 4:                                   # "big batches: two halves to save memory"
            half = B // 2
            return torch.cat([self._attend(x[:half], mask[:half]), self._attend(x[half:], None)])  # the mistake
        return self._attend(x, mask)
