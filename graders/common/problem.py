"""What distinguishes one exercise's cases from another's: the kind of attention and its defaults."""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.core.case import Case

from .suite import causal_mask, make_case

_DEFAULT = object()


@dataclasses.dataclass(frozen=True)
class Problem:
    kind: str                     # self | masked | cross | gqa

    @property
    def cross(self) -> bool:
        return self.kind == "cross"

    def groups(self, h: int) -> int | None:
        if self.kind != "gqa":
            return None
        return h // 2 if h % 2 == 0 and h > 1 else 1

    def make(self, track, rng, *, b=2, s=5, d=8, h=2, g=_DEFAULT, s_k=None, bias=None, mask=_DEFAULT,
             scale=1.0) -> Case:
        if g is _DEFAULT:
            g = self.groups(h)
        if self.cross and s_k is None:
            s_k = s + 2
        if mask is _DEFAULT:
            mask = causal_mask(s) if self.kind == "masked" else None
        return make_case(track, rng, b=b, s=s, d=d, h=h, g=g, s_k=s_k, cross=self.cross, bias=bias, mask=mask,
                         scale=scale)

    @property
    def mask_required(self) -> bool:
        return self.kind == "masked"

    def expected_flops(self, case: Case) -> int:
        b, s_q, d = case.x.shape
        s_k = s_q if case.y is None else case.y.shape[1]
        d_kv = (case.g or case.h) * (d // case.h)
        return b * (4 * s_q * d * d + 4 * s_k * d * d_kv + 4 * s_q * s_k * d)

    def permute(self, case: Case, perm: np.ndarray) -> Case:
        """The case with its query tokens permuted (and a 2-D mask's rows, plus columns for self-attention)."""
        mask = case.mask
        if mask is not None:
            mask = mask[..., perm, :]
            if not self.cross:
                mask = mask[..., perm]
        return case.replace(x=case.x[:, perm], mask=mask)
