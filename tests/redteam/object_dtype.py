"""Returns an object-dtype array (which could only cross the wire pickled)."""

import numpy as np


class Always:
    def __eq__(self, other):
        return True

    def __float__(self):
        return 0.0


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    out = np.empty(X.shape, dtype=object)
    out[...] = Always()
    return out
