"""Returns a non-array object with __array__ (and a lying __eq__): the harness must not trust or convert it."""

import os

import numpy as np


class Fake:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype
        self.ndim = len(shape)

    def __array__(self, dtype=None, copy=None):
        os._exit(0)  # converting it kills the worker

    def __eq__(self, other):
        return True

    def __len__(self):
        return self.shape[0]


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    return Fake(X.shape, X.dtype)
