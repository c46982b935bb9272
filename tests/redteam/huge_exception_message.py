"""Raises an exception whose message is 5 MB long (ending in terminal escapes), from 1000 frames deep."""


def _deep(n, X):
    if n == 0:
        raise ValueError("A" * 5_000_000 + "\x1b[2J\x1b]0;owned\x07 tail")
    return _deep(n - 1, X)


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    return _deep(900, X)
