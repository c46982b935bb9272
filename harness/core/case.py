"""One attention problem instance, in the NumPy convention (the contract): W is (d_in, d_out), Q = X @ Wq."""

from __future__ import annotations

import dataclasses

import numpy as np

ARRAY_FIELDS = ("x", "y", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "mask")


@dataclasses.dataclass
class Case:
    x: np.ndarray                      # (b, s_q, d)
    wq: np.ndarray                     # (d, d)
    wk: np.ndarray                     # (d, g*d_k)
    wv: np.ndarray                     # (d, g*d_k)
    wo: np.ndarray                     # (d, d)
    h: int
    g: int | None = None               # GQA key/value groups
    y: np.ndarray | None = None        # (b, s_k, d) cross-attention context
    mask: np.ndarray | None = None     # bool, broadcastable to (b, h, s_q, s_k); True = may NOT attend
    bq: np.ndarray | None = None       # torch-track biases (None: bias=False)
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None
    cache: tuple | None = None         # kv_cache: the (K, V) prefix, each (b, g, t, d_k); x holds only new tokens

    @property
    def d(self) -> int:
        return self.x.shape[-1]

    @property
    def has_bias(self) -> bool:
        return self.bq is not None

    def astype(self, dtype) -> "Case":
        """Inputs and weights in one dtype (masks stay bool)."""
        changes = {name: getattr(self, name).astype(dtype) for name in ARRAY_FIELDS
                   if name != "mask" and getattr(self, name) is not None}
        if self.cache is not None:
            changes["cache"] = tuple(a.astype(dtype) for a in self.cache)
        return dataclasses.replace(self, **changes)

    def replace(self, **changes) -> "Case":
        return dataclasses.replace(self, **changes)

    def arrays(self) -> dict[str, np.ndarray]:
        found = {n: getattr(self, n) for n in ARRAY_FIELDS if getattr(self, n) is not None}
        found.update({f"cache.{i}": a for i, a in enumerate(self.cache or ())})  # named as the candidate sends them
        return found

    def describe(self) -> dict:
        b, s_q, d = self.x.shape
        info = {"b": b, "s_q": s_q, "d": d, "h": self.h, "dtype": str(self.x.dtype), "bias": self.has_bias}
        if self.g is not None:
            info["g"] = self.g
        if self.y is not None:
            info["s_k"] = self.y.shape[1]
        if self.mask is not None:
            info["mask_shape"] = list(self.mask.shape)
        if self.cache is not None:
            info["prefix"] = int(self.cache[0].shape[2])
        return info


def random_case(rng: np.random.Generator, *, b=2, s=5, d=8, h=2, g=None, s_k=None, cross=False, bias=False,
                mask=None, scale=1.0) -> Case:
    """Seeded random float64 case. Weights ~ N(0, 1/d) so scores stay O(1) unless ``scale`` grows them."""
    g_eff = h if g is None else g
    d_kv = g_eff * (d // h)
    std = 1.0 / np.sqrt(d)
    x = rng.standard_normal((b, s, d)) * scale
    y = rng.standard_normal((b, s_k or s, d)) * scale if cross else None
    w = lambda n: rng.standard_normal((d, n)) * std  # noqa: E731
    case = Case(x=x, y=y, wq=w(d), wk=w(d_kv), wv=w(d_kv), wo=w(d), h=h, g=g, mask=mask)
    if bias:
        case = case.replace(bq=rng.standard_normal(d) * 0.1, bk=rng.standard_normal(d_kv) * 0.1,
                            bv=rng.standard_normal(d_kv) * 0.1, bo=rng.standard_normal(d) * 0.1)
    return case
