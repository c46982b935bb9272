"""Source similarity across a round (issue 25): a signal for a person, never a verdict.

copydetect (a maintained library built for source plagiarism detection) tokenises each file with pygments,
replaces identifiers, function and class names and strings by placeholders (so renamed variables still match),
and winnows k-grams of that text (hashed with BLAKE2b here, the same in every process; Schleimer, Wilkerson, Aiken 2003; the MOSS algorithm), so moved code and
changed comments still match. The exercise's stubs are boilerplate: what every candidate was given counts for
nobody. The score of a pair is the larger of the two shares of a file's fingerprinted tokens found in the other
(a short file copied into a long one still scores high). Identical SHA-256 is flagged outright (score 1)."""

from __future__ import annotations

import functools
import hashlib
import itertools
from dataclasses import dataclass
from types import SimpleNamespace

from markupsafe import Markup, escape

K = 25            # characters per k-gram of the filtered text (copydetect's default noise threshold)
WINDOW = 4        # winnowing window (copydetect's default guarantee threshold is K + WINDOW - 1)
THRESHOLD = 0.7   # pairs at or above this are listed on the round page (measured: near-copies >= 0.79, independent solutions <= 0.64)


@dataclass
class Pair:
    a: dict
    b: dict
    score: float
    identical: bool
    slices_a: list[tuple[int, int]]
    slices_b: list[tuple[int, int]]


def _stable_hashes(text: str) -> "np.ndarray":
    """Hashes of every K-gram, the same in every process (copydetect's own use Python's ``hash``, which
    PYTHONHASHSEED changes per process, so a pair's score would change when the server restarts)."""
    import numpy as np

    return np.array([int.from_bytes(hashlib.blake2b(text[i:i + K].encode(), digest_size=8).digest(), "little",
                                    signed=True) for i in range(len(text) - K + 1)], dtype=np.int64)


def _fingerprint(source: str, boilerplate=None):
    """copydetect's CodeFingerprint (filtered tokens, winnowed k-gram hashes, their positions), hashed stably."""
    import numpy as np
    from copydetect.utils import filter_code, get_token_coverage, winnow

    filtered, offsets = filter_code(source, "submission.py", "python")
    hashes, idx = winnow(_stable_hashes(filtered), window_size=WINDOW, remove_duplicates=False)
    if boilerplate is not None and len(boilerplate):
        _, common, _ = np.intersect1d(hashes, np.array(boilerplate, dtype=np.int64), return_indices=True)
        hashes, idx = np.delete(hashes, common), np.delete(idx, common)
    hash_idx: dict = {}
    for h, i in zip(hashes, idx):
        hash_idx.setdefault(h, []).append(i)
    return SimpleNamespace(k=K, hashes=set(hashes), hash_idx=hash_idx, filtered_code=filtered, offsets=offsets,
                           raw_code=source, token_coverage=get_token_coverage(hash_idx, K, len(filtered)))


@functools.lru_cache(maxsize=32)
def boilerplate_for(exercise: str) -> tuple:
    """The fingerprints of the exercise's stubs (every candidate started from them)."""
    from harness.service import grading

    hashes: set = set()
    for track in grading.exercise_summary(exercise)["tracks"]:
        hashes |= set(_fingerprint(grading.stub_text(exercise, track)).hashes)
    return tuple(sorted(hashes))


def compare(src_a: str, src_b: str, boilerplate=()) -> tuple[float, list, list]:
    """(score in [0, 1], matching character ranges in a, in b)."""
    return _compare(_fingerprint(src_a, boilerplate), _fingerprint(src_b, boilerplate))


def _compare(fa, fb) -> tuple[float, list, list]:
    from copydetect import compare_files

    _, (sim_a, sim_b), (sl_a, sl_b) = compare_files(fa, fb)
    ranges = lambda sl: [(int(s), int(e)) for s, e in zip(*sl)] if getattr(sl, "ndim", 1) == 2 else []  # noqa: E731
    return float(max(sim_a, sim_b)), ranges(sl_a), ranges(sl_b)


def public_solutions(folder: str | None, exercises: set[str]) -> list[dict]:
    """Known public solutions to compare against (GRADER_SIMILARITY_CORPUS: a folder with one sub-folder of .py
    files per exercise), as rows like submissions' (never compared with one another)."""
    import hashlib as _h
    from pathlib import Path

    out = []
    if not folder:
        return out
    for ex in sorted(exercises):
        for p in sorted((Path(folder) / ex).glob("*.py"))[:500]:
            src = p.read_text(encoding="utf-8", errors="replace")
            out.append({"id": f"public:{p.name}", "candidate_id": "public", "candidate": f"public: {p.name}",
                        "exercise": ex, "source": src, "sha256": _h.sha256(src.encode()).hexdigest(),
                        "public": True})
    return out


def pairs(rows: list[dict], *, threshold: float = THRESHOLD, corpus: str | None = None) -> list[Pair]:
    """Every pair of submissions of one exercise from different candidates (and each submission with every known
    public solution of its exercise, GRADER_SIMILARITY_CORPUS), scored; those at or above
    ``threshold`` (and every identical pair), best first. The best pair per two candidates is kept."""
    import os

    corpus = os.environ.get("GRADER_SIMILARITY_CORPUS") if corpus is None else corpus
    best: dict[tuple, Pair] = {}
    by_ex: dict[str, list[dict]] = {}
    for r in list(rows) + public_solutions(corpus, {r["exercise"] for r in rows}):
        by_ex.setdefault(r["exercise"], []).append(r)
    for exercise, subs in by_ex.items():
        bp = boilerplate_for(exercise)
        fps = {r["id"]: _fingerprint(r["source"], bp) for r in subs}      # once per file, not per pair
        for a, b in itertools.combinations(subs, 2):
            who_a, who_b = a.get("candidate_id") or a["id"], b.get("candidate_id") or b["id"]
            if who_a == who_b:
                continue
            if a.get("public"):
                a, b = b, a                     # the candidate's side first
            who_a, who_b = a.get("candidate_id") or a["id"], b["id"] if b.get("public") else who_b
            if a["sha256"] == b["sha256"]:
                p = Pair(a, b, 1.0, True, [(0, len(a["source"]))], [(0, len(b["source"]))])
            else:
                score, sa, sb = _compare(fps[a["id"]], fps[b["id"]])
                p = Pair(a, b, score, False, sa, sb)
            if not p.identical and p.score < threshold:
                continue
            key = (exercise, *sorted((who_a, who_b)))
            if key not in best or p.score > best[key].score:
                best[key] = p
    return sorted(best.values(), key=lambda p: (-p.score, p.a["exercise"]))


def highlighted(source: str, ranges: list[tuple[int, int]]) -> Markup:
    """The source, escaped, with the matching ranges in <mark>."""
    out, pos = [], 0
    for s, e in sorted(ranges):
        s = max(s, pos)
        if e <= s:
            continue
        out.append(escape(source[pos:s]))
        out.append(Markup('<mark class="match">') + escape(source[s:e]) + Markup("</mark>"))
        pos = e
    out.append(escape(source[pos:]))
    return Markup("").join(out)
