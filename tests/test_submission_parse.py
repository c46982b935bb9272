"""Submissions are parsed one at a time per process (harness/core/pysource.py): CPython 3.11's AST constructor
keeps its recursion depth in state every thread shares, and two parses at once made `grade serve` answer a valid
submission with HTTP 500 ("SystemError: AST constructor recursion depth mismatch", seen under bench_service)."""

from __future__ import annotations

import ast
import threading
import time

from harness.core import pysource
from harness.core.exercises import get_exercise
from harness.grading.submission import Submission, banned_api_uses, detect_track
from harness.session.static_layout import _Reader


def test_parses_from_many_threads_never_overlap(monkeypatch, tmp_path):
    inside, most = [0], [0]
    lock = threading.Lock()
    real = ast.parse

    def slow_parse(source, *a, **kw):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.01)                                  # long enough for every other thread to arrive
        try:
            return real(source, *a, **kw)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(pysource.ast, "parse", slow_parse)
    source = "import numpy as np\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    return X\n"
    sub = Submission(tmp_path / "s.py", source, "", len(source))
    mha = get_exercise("mha")
    tracks, scans = [], []
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait(30)
        for _ in range(3):
            if i % 3 == 0:
                tracks.append(detect_track(sub, mha))      # the API's intake
            elif i % 3 == 1:
                scans.append(banned_api_uses(source + f"# {i}\n"))
            else:
                _Reader(source + f"# {i}\n", "mha")         # the torch layout read (uncached: a fresh text)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert most[0] == 1, most[0]
    assert tracks == ["numpy"] * 9 and scans == [[]] * 9
