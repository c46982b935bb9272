"""Raises KeyboardInterrupt inside the call (a BaseException that naive `except Exception` handlers miss)."""


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    raise KeyboardInterrupt
