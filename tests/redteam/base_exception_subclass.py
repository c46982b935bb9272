"""Raises a custom BaseException subclass whose __str__ itself raises SystemExit and whose name is odd."""


class Sneaky(BaseException):
    def __str__(self):
        raise SystemExit(0)

    def __repr__(self):
        raise KeyboardInterrupt


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    raise Sneaky()
