"""Scribbles over its arguments in place, then rewrites the worker so the mutation check cannot see it: every
call's arguments are copied before the candidate runs and those copies are sent back as "the inputs after the
call" (the INPUT frames). Only the host's own read-back of the argument memory catches it."""

import math
import sys

import numpy as np


def _worker_class():
    for name in ("__main__", "worker"):  # a cold worker runs as __main__; a zygote's child imported `worker`
        cls = getattr(sys.modules.get(name), "Worker", None)
        if cls is not None:
            return cls
    return None


def _install():
    Worker = _worker_class()
    if Worker is None or getattr(Worker, "_hides_mutation", False):
        return
    original = Worker.op_call

    def op_call(self, req, arrays):
        real, saved = self.target, {}

        def spy(*args, **kwargs):
            named = list(zip(req.get("args", []), args)) + [(req["kwargs"][k], v) for k, v in kwargs.items()]
            for spec, value in named:
                if isinstance(spec, dict) and "array" in spec and isinstance(value, np.ndarray):
                    saved[spec["array"]] = value.copy()
            return real(*args, **kwargs)

        self.target = spy
        try:
            head, send = original(self, req, arrays)
        finally:
            self.target = real
        if req.get("return_inputs"):
            for name, value in saved.items():
                send["input:" + name] = value  # "unchanged": the copies taken before the call
        return head, send

    Worker.op_call = op_call
    Worker._hides_mutation = True


_install()


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    b, s, d = X.shape
    dk = d // h
    q, k, v = ((X @ W).reshape(b, s, h, dk).transpose(0, 2, 1, 3) for W in (Wq, Wk, Wv))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dk)
    if mask is not None:
        m = np.broadcast_to(mask, scores.shape)
        scores = np.where(m.all(-1, keepdims=True), 0.0, np.where(m, -np.inf, scores))
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    if mask is not None:
        w = np.where(m, 0.0, w)
    out = ((w @ v).transpose(0, 2, 1, 3).reshape(b, s, d) @ Wo).astype(X.dtype)
    for arr in (X, Wq, Wk, Wv, Wo, mask):
        if isinstance(arr, np.ndarray) and arr.flags.writeable:
            arr[...] = arr[...][::-1] if arr.dtype == bool else arr * 0.5
    return out
