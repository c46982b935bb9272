"""Similarity across a round (issue 25), measured: on the project's correct variants and references, a near-copy
of any file (identifiers renamed, two independent statements swapped, comments reworded) scores above every pair
of independent solutions of the same exercise. The figures are printed (pytest -s) for the closing note."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.service import similarity
from tests.service.nearcopy import near_copy, rename_and_recomment, reorder

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = sorted(p.name for p in (ROOT / "tests" / "variants").iterdir() if p.is_dir())


def _solutions(exercise: str) -> dict[str, str]:
    files = sorted((ROOT / "tests" / "variants" / exercise).glob("*.py"))
    files += sorted((ROOT / "reference").glob(f"{exercise}_*.py"))
    return {p.name: p.read_text() for p in files}


def test_near_copies_are_changed_copies():
    src = (ROOT / "tests" / "variants" / "mha" / "numpy_einsum.py").read_text()
    assert reorder(src) != src and sorted(reorder(src).splitlines()) == sorted(src.splitlines())
    renamed = rename_and_recomment(src)
    assert "scores" in src and "scores" not in renamed.replace("my_scores_val", "")
    assert "# masked entries are exactly 0" not in renamed


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_near_copy_ranks_above_every_independent_pair(exercise):
    srcs = _solutions(exercise)
    assert len(srcs) >= 4
    bp = similarity.boilerplate_for(exercise)
    independent = {(a, b): similarity.compare(srcs[a], srcs[b], bp)[0] for a, b in itertools.combinations(srcs, 2)}
    near = {a: similarity.compare(s, near_copy(s), bp)[0] for a, s in srcs.items()}
    worst_near, best_indep = min(near.values()), max(independent.values())
    print(f"\n{exercise}: {len(srcs)} solutions, near-copies {worst_near:.3f}..{max(near.values()):.3f}, "
          f"independent pairs {min(independent.values()):.3f}..{best_indep:.3f} "
          f"(max {max(independent, key=independent.get)})")
    assert worst_near > best_indep, (near, independent)
    assert worst_near >= similarity.THRESHOLD > best_indep     # the round page's default threshold separates them


def test_a_folder_of_public_solutions_is_compared_with_every_submission(tmp_path):
    right = (ROOT / "tests" / "variants" / "mha" / "numpy_einsum.py").read_text()
    other = (ROOT / "tests" / "variants" / "mha" / "torch_fused_qkv.py").read_text()
    (tmp_path / "mha").mkdir()
    (tmp_path / "mha" / "blog_post.py").write_text(right)
    (tmp_path / "mha" / "unrelated.py").write_text(other)
    row = lambda i, src: {"id": f"s{i}", "candidate_id": f"c{i}", "candidate": f"C{i}", "exercise": "mha",  # noqa: E731
                          "source": src, "sha256": __import__("hashlib").sha256(src.encode()).hexdigest()}
    found = similarity.pairs([row(1, near_copy(right))], corpus=str(tmp_path))
    assert [(p.a["id"], p.b["id"], p.identical) for p in found] == [("s1", "public:blog_post.py", False)]
    assert found[0].score >= similarity.THRESHOLD
    assert similarity.pairs([row(1, near_copy(right))], corpus="") == []     # no folder: nothing to compare with
