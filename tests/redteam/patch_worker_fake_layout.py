"""Torch track: a correct module whose parameters are NOT in a layout the grader accepts (in_proj + out_proj), and
a rewritten worker that reports them as the accepted fused layout (qkv + wo) and translates the host's weights
and the gradients between the two. Every number it returns is right; only the host's static read of the class
(which declares in_proj and out_proj) shows the report is forged."""

import math
import sys

import torch
from torch import nn

RENAME = {"in_proj": "qkv", "out_proj": "wo"}
BACK = {v: k for k, v in RENAME.items()}


def _swap(name, table):
    head, dot, tail = name.partition(".")
    return table.get(head, head) + dot + tail


def _worker_class():
    for name in ("__main__", "worker"):
        cls = getattr(sys.modules.get(name), "Worker", None)
        if cls is not None:
            return cls
    return None


def _install():
    Worker = _worker_class()
    if Worker is None or getattr(Worker, "_fakes_layout", False):
        return
    init, forward = Worker.op_init, Worker.op_forward

    def op_init(self, req):
        head, send = init(self, req)
        for p in head.get("params", []):
            p["name"] = _swap(p["name"], RENAME)
        return head, send

    def op_forward(self, req, arrays):
        req = dict(req, state={_swap(k, BACK): v for k, v in req.get("state", {}).items()})
        head, send = forward(self, req, arrays)
        renamed = {}
        for key, value in send.items():
            for prefix in ("grad:param:", "input:param:"):
                if key.startswith(prefix):
                    key = prefix + _swap(key[len(prefix):], RENAME)
            renamed[key] = value
        return head, renamed

    Worker.op_init, Worker.op_forward = op_init, op_forward
    Worker._fakes_layout = True


_install()


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.h, self.dk = n_heads, d_model // n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.h, self.dk).transpose(1, 2) for t in self.in_proj(x).split(d, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            m = mask.to(torch.bool).expand_as(scores)
            full = m.all(dim=-1, keepdim=True)
            scores = scores.masked_fill(m, float("-inf")).masked_fill(full, 0.0)
        w = torch.softmax(scores, dim=-1)
        if mask is not None:
            w = w.masked_fill(m, 0.0)
        return self.out_proj((w @ v).transpose(1, 2).reshape(b, s, d))
