"""The flash_attention exercise end to end: the track of a function-style torch file is detected, and the memory
test (measured by the host from the worker's cgroup) fails an implementation that builds the (s, s) matrix and passes a tiled one on
both tracks, with the measured peak, the bound and the size of one score matrix in the report."""

import pytest

from graders.common.flash import FlashCase, memory_bound
from graders.mutants.build import write_mutant
from harness.core.exercises import REFERENCE_DIR, get_exercise
from harness.grading.engine import grade
from harness.grading.submission import detect_track, load_submission

import numpy as np

MEMORY_TESTS = ("test_memory_stays_linear_in_s[full]", "test_memory_stays_linear_in_s[causal]")


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_track_is_detected_although_both_tracks_define_a_function(track):
    sub = load_submission(REFERENCE_DIR / f"flash_attention_{track}.py")
    assert detect_track(sub, get_exercise("flash_attention")) == track


def test_bound_is_linear_in_s_and_far_below_the_score_matrix():
    q = np.zeros((1, 1, 4096, 16))
    case = FlashCase(q, q, q, 64, False)
    assert memory_bound(case) == 8 * 4096 * (16 + 64) * 8                      # 20 MiB
    assert memory_bound(case) * 6 < 4096 * 4096 * 8                            # one (s, s) float64 matrix: 128 MiB
    double = FlashCase(np.zeros((1, 1, 8192, 16)), np.zeros((1, 1, 8192, 16)), np.zeros((1, 1, 8192, 16)), 64, False)
    assert memory_bound(double) == 2 * memory_bound(case)


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_memory_test_fails_the_full_matrix_and_passes_the_tiled_reference(track, tmp_path):
    tiled = grade(exercise="flash_attention", submission=REFERENCE_DIR / f"flash_attention_{track}.py",
                  track=track, sandbox="local")
    full = grade(exercise="flash_attention", submission=write_mutant(tmp_path, "flash_attention", track,
                                                                      {"flash_full_scores"}),
                 track=track, sandbox="local")
    for test_id in MEMORY_TESTS:
        ok = next(t for t in tiled.tests if t.id == test_id)
        bad = next(t for t in full.tests if t.id == test_id)
        assert ok.status == "passed" and bad.status == "failed", (ok.message, bad.message)
        for t in (ok, bad):
            assert t.diagnostics["score_matrix_bytes"] == 4096 * 4096 * 8
            assert t.diagnostics["tile_bound_bytes"] == 8 * 4096 * (16 + 64) * 8
            assert t.diagnostics["bound_bytes"] == 8 * 4096 * (16 + 64) * 8 + (48 << 20)
            assert "worker_peak_bytes" in t.diagnostics and "cgroup" in t.diagnostics["method"]
        print(f"{track} {test_id}: correct peak {ok.diagnostics['peak_bytes'] / 2 ** 20:.1f} MiB, full matrix "
              f"{bad.diagnostics['peak_bytes'] / 2 ** 20:.1f} MiB, bound {ok.diagnostics['bound_bytes'] / 2 ** 20:.1f} MiB")
        assert ok.diagnostics["peak_bytes"] < ok.diagnostics["bound_bytes"] / 1.5
        assert bad.diagnostics["peak_bytes"] >= bad.diagnostics["score_matrix_bytes"]
        assert "peak extra memory" in bad.message and "MiB" in bad.message and "128.0 MiB" in bad.message
    assert [t.id for t in full.tests if t.status != "passed"] == list(MEMORY_TESTS)
    assert [d.bug for d in full.diagnosis] == ["flash_full_scores"]
    assert full.diagnosis[0].evidence["peak_bytes"] >= 4096 * 4096 * 8
