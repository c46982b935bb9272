"""Meta-tests that keep the suites honest: every catalogued mutant fails and is named by its own id."""

from pathlib import Path

import pytest

from graders.mutants.build import write_mutant
from graders.mutants.catalog import CATALOG, applicable
from harness.core.exercises import all_exercises
from harness.grading.engine import grade

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXERCISES = ("mha", "masked_mha", "cross_attention", "gqa", "kv_cache", "flash_attention", "attention_cost")
COMBOS = [(ex, tr) for ex in EXERCISES for tr in all_exercises()[ex].track_names]


def test_bug_vocabulary_is_the_contract():
    assert [b.id for b in CATALOG] == [
        "scale_sqrt_d", "no_scale", "split_without_transpose", "merge_without_transpose", "softmax_wrong_axis",
        "missing_output_projection", "transposed_weights", "mask_inverted", "mask_after_softmax",
        "masked_rows_nan", "masked_rows_mean_v", "causal_excludes_diagonal", "no_max_subtraction",
        "dtype_promoted", "bias_ignored", "gqa_tiled_heads", "cross_kv_from_queries", "input_mutated",
        "kv_cache_repeated_heads", "kv_mask_from_zero", "kv_no_causal_mask", "kv_prefix_ignored", "kv_cache_stale",
        "kv_cache_new_only", "kv_cache_swapped",
        "flash_no_rescale_acc", "flash_no_rescale_sum", "flash_no_final_divide", "flash_last_block_dropped",
        "flash_causal_block_local", "flash_causal_bottom_right", "flash_full_scores",
        "cost_bias_forgotten", "cost_bias_per_head", "cost_params_grow_with_h", "cost_madd_one_flop",
        "cost_wo_forgotten", "cost_s_squared_missing", "cost_s_squared_once", "cost_cross_kv_over_sq",
        "cost_gqa_kv_with_h", "cost_kv_no_factor_two", "cost_kv_per_query_head", "cost_elements_not_bytes",
        "cost_scores_without_heads", "cost_dk_as_d", "cost_heads_not_transposed", "cost_float_counts",
        "precision_lowered", "missing_bias_q", "missing_bias_k", "missing_bias_v", "missing_bias_o",
        "constructor_without_bias", "extra_bias", "layout_renamed"]


def test_every_exercise_is_in_the_catalogue_test():
    assert set(EXERCISES) == set(all_exercises())


# one test per mutant (not per exercise and track): a failure names its mutant, `-k` runs one, --durations shows
# which are slow. Graded through warm local workers (a fork of a zygote that has imported torch: the grading is
# the subject here, not the worker's start, and a cold torch worker costs seconds per mutant) and kept suites (as
# `grade batch` and `grade serve` grade: collected once per process); the reports are a cold worker's and a fresh
# pytest.main's (tests/test_warm.py, tests/test_kept_suites.py), and a few mutants are graded cold below.
MUTANTS = [(ex, tr, bug.id) for ex, tr in COMBOS for bug in applicable(ex, tr)]


def _twin_in_matrix() -> set:
    """A bug both tracks of an exercise have is one mistake graded twice (issue 24: the same thing two ways): the
    default run grades it on one track, alternating along each exercise's catalogue (so both tracks' diagnosis of
    shared bugs runs: the worker's module path and gradients on torch, the pipelined calls on NumPy), and its twin
    in the matrix group, which CI runs. A bug only one track has (the torch layouts and biases) always runs."""
    tracks: dict = {}
    for ex, tr, bug in MUTANTS:
        tracks.setdefault((ex, bug), []).append(tr)
    twins, seen = set(), {}
    for (ex, bug), trs in tracks.items():
        if set(trs) >= {"numpy", "torch"}:
            i = seen[ex] = seen.get(ex, -1) + 1
            twins.add((ex, "torch" if i % 2 == 0 else "numpy", bug))
    return twins


TWINS = _twin_in_matrix()


@pytest.mark.slow
@pytest.mark.parametrize("exercise,track,bug", [
    pytest.param(e, t, b, id=f"{e}-{t}-{b}", marks=[pytest.mark.matrix] if (e, t, b) in TWINS else [])
    for e, t, b in MUTANTS])
def test_every_mutant_is_killed_and_diagnosed(exercise, track, bug, tmp_path, local_warm_pool, kept_suites):
    path = write_mutant(tmp_path, exercise, track, {bug})
    report = grade(exercise=exercise, submission=path, track=track, sandbox=local_warm_pool)
    failing = [t.id for t in report.tests if t.status != "passed"]
    names = [d.bug for d in report.diagnosis]
    assert failing, f"{bug}: the mutant passes every test (not killed)"
    assert names and names[0] == bug, f"{bug}: failing={failing[:4]} diagnosis={names}"


def test_every_exercise_and_track_has_mutants():
    assert {(e, t) for e, t, _ in MUTANTS} == set(COMBOS)


def test_the_default_run_grades_every_bug_of_every_exercise_once_at_least():
    """The twins left to the matrix group: each is a bug the other track grades by default; both tracks keep some."""
    default = [(e, t, b) for e, t, b in MUTANTS if (e, t, b) not in TWINS]
    assert {(e, b) for e, _, b in default} == {(e, b) for e, _, b in MUTANTS}
    assert {(e, t) for e, t, _ in default} == set(COMBOS)
    for e, t, b in TWINS:
        assert (e, "numpy" if t == "torch" else "torch", b) in default


@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_two_mistakes_are_both_named(track, tmp_path):
    path = write_mutant(tmp_path, "mha", track, {"no_scale", "mask_after_softmax"})
    report = grade(exercise="mha", submission=path, track=track, sandbox="local")
    assert report.verdict == "failed"
    assert {d.bug for d in report.diagnosis} == {"no_scale", "mask_after_softmax"}


def test_unexplained_failure_gets_no_guess(tmp_path):
    path = tmp_path / "noise.py"
    path.write_text("import numpy as np\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
                    "    return (X @ Wq + 0.01 * np.sin(X)).astype(X.dtype)\n")
    report = grade(exercise="mha", submission=path, track="numpy", sandbox="local")
    assert report.verdict == "failed"
    assert report.diagnosis == []


SEEDED = [("mha", "examples", 1), ("mha", "examples", 5), ("mha", "examples", 10), ("gqa", "softmax_wrong_axis", 2)]


@pytest.mark.parametrize("exercise,bug,seed", SEEDED, ids=[f"{e}-{b}-{s}" for e, b, s in SEEDED])
def test_a_numeric_mistake_is_not_also_called_a_lower_precision(exercise, bug, seed, tmp_path):
    """At these seeds a numeric mistake errs by only ~5e-9 (a wrong scale on saturated scores) or ~2e-6 (a softmax
    over the wrong axis of a 2-key case) on one float64 output: inside float32's tolerance, so the charge-once rule
    records "a lower precision" there. The named mistake reproduces those outputs to float64's tolerance, which a
    float32 softmax cannot: precision_lowered must not be named beside it. (examples: mha_wrong_scale.py, the
    service's page test's file, which names scale_sqrt_d.)"""
    if bug == "examples":
        path, bug = EXAMPLES / "mha_wrong_scale.py", "scale_sqrt_d"
    else:
        path = write_mutant(tmp_path, exercise, "numpy", {bug})
    report = grade(exercise=exercise, submission=path, track="numpy", sandbox="local", seed=seed)
    assert [d.bug for d in report.diagnosis] == [bug]


def test_the_mutants_answers_are_computed_once_per_process(tmp_path, local_warm_pool, monkeypatch):
    """The diagnosis's mutant oracles depend on the cases, not on the candidate's outputs: a grading process's second
    failing grade on the same cases computes none of them again, and names the same mistake."""
    from graders.mutants import diagnose as dg

    calls = []
    real = dg._mutant_output
    monkeypatch.setattr(dg, "_mutant_output", lambda obs, bugs: calls.append(1) or real(obs, bugs))
    monkeypatch.setattr(dg, "_memo", type(dg._memo)())
    monkeypatch.setattr(dg, "_memo_size", [0])
    path = write_mutant(tmp_path, "mha", "numpy", {"scale_sqrt_d"})
    first = grade(exercise="mha", submission=path, track="numpy", sandbox=local_warm_pool)
    computed = len(calls)
    second = grade(exercise="mha", submission=path, track="numpy", sandbox=local_warm_pool)
    assert computed > 0 and len(calls) == computed
    assert [d.to_dict() for d in first.diagnosis] == [d.to_dict() for d in second.diagnosis]
    assert first.diagnosis[0].bug == "scale_sqrt_d"


def test_a_kv_cache_call_checked_against_the_whole_sequence_is_judged_on_its_own_only_when_asked(
        tmp_path, local_warm_pool, monkeypatch):
    """issue 27: a chained kv_cache call (the long decoding, the chunkings, the value-space cases) is asserted
    against the whole sequence's reference; whether it is also right against a step of the oracle on the cache
    the candidate was given is the diagnosis's question. That step is computed only when something asks (a failing
    grade's diagnosis, the report's plots of a failed test), not on every call of every grade."""
    from graders.common import kv
    from harness.grading import artifacts

    seen, steps = [], []
    collect, step = artifacts.collect, kv.step
    monkeypatch.setattr(artifacts, "collect", lambda obs, results, **kw: seen.append(list(obs)) or collect(obs, results,
                                                                                                            **kw))
    monkeypatch.setattr(kv, "step", lambda case: steps.append(1) or step(case))
    reference = EXAMPLES.parent / "reference" / "kv_cache_numpy.py"
    report = grade(exercise="kv_cache", submission=reference, track="numpy", sandbox=local_warm_pool,
                   keep_artifacts=True)
    assert report.verdict == "passed"
    lazy = [o for o in seen[-1] if o.kind == "forward" and callable(o.verdict)]
    assert len(lazy) >= 56, len(lazy)                  # the long decoding's 56 calls at least, none judged
    before = len(steps)
    verdicts = [o.passed for o in lazy]                 # asked now: one step each
    assert len(steps) == before + len(lazy)
    assert all(v for o, v in zip(lazy, verdicts) if not o.test_id.startswith("test_value_space"))   # (its own tol)
    assert [o.passed for o in lazy] == verdicts and len(steps) == before + len(lazy)   # and asked once
    path = write_mutant(tmp_path, "kv_cache", "numpy", {"kv_cache_stale"})
    report = grade(exercise="kv_cache", submission=path, track="numpy", sandbox=local_warm_pool, keep_artifacts=True)
    assert [d.bug for d in report.diagnosis] == ["kv_cache_stale"]
    assert not any(callable(o.verdict) for o in seen[-1])   # the diagnosis asked every one


def test_the_diagnosis_compares_outputs_exactly_as_before_its_one_pass_path():
    """Where both outputs are finite, the diagnosis compares them in one pass (np.isclose's own test, ~3 ms of a
    failing mha grade); everywhere else as before (`_matches_anywhere`, the comparison it always made, for every
    input). The verdict and the deviation it reports are the same, bit for bit: near the tolerance's edge, at zero,
    empty, float32, NaN and inf in either or both, huge magnitudes."""
    import numpy as np

    from graders.mutants.diagnose import _matches, _matches_anywhere

    rng = np.random.default_rng(27)
    for trial in range(2000):
        shape = tuple(rng.integers(0 if trial % 97 == 0 else 1, 5, size=rng.integers(1, 4)))
        e = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
        tol = float(rng.choice([1e-7, 2e-4, 1e-10]))
        a = e + rng.choice([-1, 1], size=shape) * (tol + tol * np.abs(e)) * rng.choice([0.0, 0.5, 1.0, 1.0000001, 2.0])
        if trial % 5 == 0 and a.size:
            special = rng.choice([np.nan, np.inf, -np.inf, 1e308])
            a.flat[rng.integers(a.size)] = special
            if trial % 10 == 0:
                e.flat[rng.integers(e.size)] = special
        if trial % 7 == 0:
            with np.errstate(over="ignore"):      # 1e308 becomes inf in float32
                a, e = a.astype(np.float32), e.astype(np.float32)
        before = _matches_anywhere(a.astype(np.float64), e.astype(np.float64), tol)
        assert _matches(a, e, a.dtype, tol=tol) == before, (trial, a, e, tol)
