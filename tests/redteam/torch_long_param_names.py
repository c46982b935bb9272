"""Torch track: a module with 60 parameters whose names are 250 characters of escape-laden junk, so every
structure message and diagnostic that lists the parameters found is as long as it can be."""

import torch
from torch import nn

JUNK = "\x1b[31m" + "p" * 240


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        for i in range(60):
            self.register_parameter(f"{JUNK}{i:03d}", nn.Parameter(torch.zeros(d_model, d_model)))

    def forward(self, x, mask=None):
        return x
