"""Write mutants out as candidate files: the reference with exactly the given bug(s)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ORACLE = HERE.parent / "common" / "oracle.py"
FLASH_ORACLE = HERE.parent / "common" / "flash_oracle.py"   # flash_attention's NumPy mutants start from this file

NUMPY_ENTRIES = {
    "mha": ("def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
            "    return forward(X, Wq, Wk, Wv, Wo, h, mask=mask, bugs=BUGS)\n"),
    "masked_mha": ("def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):\n"
                   "    return forward(X, Wq, Wk, Wv, Wo, h, mask=mask, bugs=BUGS)\n"),
    "cross_attention": ("def cross_attention(X, Y, Wq, Wk, Wv, Wo, h, mask=None):\n"
                        "    return forward(X, Wq, Wk, Wv, Wo, h, y=Y, mask=mask, bugs=BUGS)\n"),
    "gqa": ("def gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None):\n"
            "    return forward(X, Wq, Wk, Wv, Wo, h, g=g, mask=mask, bugs=BUGS)\n"),
    "kv_cache": ("def kv_attention(X, Wq, Wk, Wv, Wo, h, g, cache=None):\n"
                 "    return kv_step(X, Wq, Wk, Wv, Wo, h, g, cache, bugs=BUGS)\n"),
    "flash_attention": ("def flash_attention(Q, K, V, block_size=64, causal=False):\n"
                        "    return flash_forward(Q, K, V, block_size, causal, bugs=BUGS)\n"),
}


COST_ORACLE = HERE.parent / "common" / "cost_oracle.py"     # attention_cost's mutants: the oracle with BUGS set
PLAIN_MUTANTS = {"python": COST_ORACLE}                     # tracks whose mutant is a standalone oracle file


def mutant_source(exercise: str, track: str, bugs) -> str:
    flags = f"BUGS = frozenset({sorted(bugs)!r})\n"
    if track in PLAIN_MUTANTS:
        return PLAIN_MUTANTS[track].read_text().replace("BUGS = frozenset()\n", flags, 1)
    if track == "numpy":
        base = FLASH_ORACLE if exercise == "flash_attention" else ORACLE
        return f"{base.read_text()}\n\n{flags}\n\n{NUMPY_ENTRIES[exercise]}"
    text = (HERE / "torch_template.py").read_text()
    return text.replace("BUGS = frozenset()\n", flags, 1)


def write_mutant(directory: Path, exercise: str, track: str, bugs) -> Path:
    path = Path(directory) / f"{exercise}_{track}_{'_'.join(sorted(bugs)) or 'clean'}.py"
    path.write_text(mutant_source(exercise, track, bugs))
    return path
