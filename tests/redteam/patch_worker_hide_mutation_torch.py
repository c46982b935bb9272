"""Torch track: flips the caller's mask and halves x in place after computing a correct output, then rewrites the
worker so that what it sends back as "the inputs after the call" are copies taken before the call. Only the
host's own read-back of the argument memory catches it."""

import math
import sys

import torch
from torch import nn


def _worker_class():
    for name in ("__main__", "worker"):
        cls = getattr(sys.modules.get(name), "Worker", None)
        if cls is not None:
            return cls
    return None


def _install():
    Worker = _worker_class()
    if Worker is None or getattr(Worker, "_hides_mutation", False):
        return
    original = Worker.op_forward

    def op_forward(self, req, arrays):
        module, saved = self.module, {}
        if module is None:
            return original(self, req, arrays)
        real = type(module).forward

        def spy(*args, **kwargs):
            named = list(zip(req.get("args", []), args)) + [(req["kwargs"][k], v) for k, v in kwargs.items()]
            for spec, value in named:
                if isinstance(spec, dict) and "array" in spec and isinstance(value, torch.Tensor):
                    saved[spec["array"]] = value.detach().clone().numpy()
            return real(module, *args, **kwargs)

        module.forward = spy
        try:
            head, send = original(self, req, arrays)
        finally:
            del module.forward
        if req.get("return_inputs"):
            for name, value in saved.items():
                send["input:" + name] = value
        return head, send

    Worker.op_forward = op_forward
    Worker._hides_mutation = True


_install()


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.h, self.dk).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            m = mask.to(torch.bool).expand_as(scores)
            full = m.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(m, float("-inf")).masked_fill(full, 0.0)
        w = torch.softmax(scores, dim=-1)
        if mask is not None:
            w = w.masked_fill(m, 0.0)
        out = self.wo((w @ v).transpose(1, 2).reshape(b, s, d))
        with torch.no_grad():
            if not x.requires_grad:
                x.mul_(0.5)
            if mask is not None and mask.dtype == torch.bool:
                mask.logical_not_()
        return out
