"""The oracle's kept answers (harness/core/answers.py): keyed by the case's content, read back only where the
engine allows the disk, a damaged file is a miss, the folder is hidden from the local sandbox's worker; and the
CLI's lean start (a local grade imports none of the service's packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graders.common.problem import Problem
from graders.common.shapes import build, checked_rows, kept_reference, large_shape, reference_rows
from harness.core import answers


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv(answers.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(answers, "_written", {"checked": False, "full": False})
    answers.forget()
    yield tmp_path / "answers"
    answers.forget()


def _case(which="b8-s144-float64", kind="self"):
    problem = Problem(kind)
    sh = large_shape(problem, "numpy", which)
    return build(problem, sh), checked_rows(sh)


def test_a_kept_answer_is_the_computed_one_and_is_read_back_from_disk(store):
    case, rows = _case("s512-float32")
    fresh = reference_rows(case, rows)
    with answers.use_disk(True):
        first = kept_reference(case, rows)
    assert np.array_equal(first, fresh) and first.dtype == fresh.dtype
    assert answers.counts() == {"computed": 1}
    assert len(list(store.rglob("*.npy"))) == 1
    answers.forget()  # a new process: nothing in memory
    with answers.use_disk(True):
        again = kept_reference(case, rows)
    assert answers.counts() == {"disk": 1}
    assert np.array_equal(again, fresh) and not again.flags.writeable
    kept_reference(case, rows)
    assert answers.counts() == {"disk": 1, "memo": 1}


def test_without_the_engines_leave_the_disk_is_neither_read_nor_written(store):
    case, rows = _case()
    kept_reference(case, rows)
    assert not store.exists()
    with answers.use_disk(True):
        kept_reference(case, rows)   # from memory: still nothing written
    assert answers.counts() == {"computed": 1, "memo": 1} and not store.exists()


def test_the_key_follows_the_content_not_the_name(store):
    case, rows = _case()
    other = case.replace(x=case.x.copy())
    other.x[0, 0, 0] += 1e-12      # the same shape and seed, one input changed: another answer
    a, b = kept_reference(case, rows), kept_reference(other, rows)
    assert answers.counts() == {"computed": 2}
    assert not np.array_equal(a, b)
    assert np.array_equal(b, reference_rows(other, rows))
    cross, cross_rows = _case(kind="cross")
    kept_reference(cross, cross_rows)
    assert answers.counts() == {"computed": 3}


def test_a_damaged_or_planted_file_is_a_miss_or_a_different_key(store):
    case, rows = _case()
    with answers.use_disk(True):
        good = kept_reference(case, rows)
    [path] = store.rglob("*.npy")
    path.write_bytes(b"\x93NUMPY garbage")
    answers.forget()
    with answers.use_disk(True):
        again = kept_reference(case, rows)
    assert answers.counts() == {"computed": 1} and np.array_equal(again, good)


def test_the_answers_folder_is_hidden_from_the_local_worker(store):
    from harness.sandbox import local

    store.mkdir(parents=True)
    kept = str(store.resolve())
    assert any(kept == h or local._inside(kept, h) for h in local.hidden_paths()), local.hidden_paths()


def test_the_engine_keeps_answers_on_disk_only_where_the_worker_cannot_see_them():
    from harness.grading.engine import _host_hidden

    class Box:
        def __init__(self, info):
            self.info = info

        def describe(self):
            return self.info

    assert _host_hidden(Box({"sandbox": "docker", "image": "x"}))
    assert _host_hidden(Box({"sandbox": "local", "read_only_fs": True}))
    assert not _host_hidden(Box({"sandbox": "local", "read_only_fs": False}))


def test_the_services_grading_task_keeps_no_answer_on_disk(store, tmp_path):
    """The service draws a fresh seed for every submission, so its grading task (harness/service/queue/pool.py,
    checked in tests/test_service_pool.py) keeps answers in memory only; a one-shot grade of the same file keeps
    them on disk where the worker cannot see them (the local sandbox with its mount namespace)."""
    from harness.grading.engine import _host_hidden
    from harness.grading.process import grade_task
    from harness.sandbox import get_sandbox

    if not _host_hidden(get_sandbox("local")):
        pytest.skip("the local sandbox here has no mount namespace: no answer is kept on disk at all")
    source = Path(__file__).resolve().parent.parent / "reference" / "mha_numpy.py"
    task = {"exercise": "mha", "path": str(source), "track": "numpy", "sandbox": "local", "seed": 12345}
    assert grade_task(dict(task, answers_on_disk=False))["report"]["verdict"] == "passed"
    assert not store.exists() or not any(store.rglob("*.npy"))
    answers.forget()
    assert grade_task(task)["report"]["verdict"] == "passed"
    assert any(store.rglob("*.npy"))


def test_a_local_grade_from_the_cli_imports_none_of_the_service():
    code = ("import sys\n"
            "from harness.cli.main import main\n"
            "cmd = main.get_command(None, 'run')\n"
            "import harness.grading.engine, harness.sandbox.local, harness.session.channel\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'sqlalchemy', 'torch', 'httpx',"
            " 'starlette', 'dramatiq', 'redis', 'docker', 'rich', 'jinja2') or m.startswith('harness.service')"
            " or m == 'harness.sandbox.docker')\n"
            "print(cmd.name, bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "run []", out


def test_a_full_folder_is_pruned_to_half_oldest_first_and_written_again(store, monkeypatch):
    import os

    monkeypatch.setattr(answers, "DISK_ENTRIES", 6)
    old = store / "ab"
    old.mkdir(parents=True)
    for i in range(7):   # over the cap: before this change nothing was written any more
        f = old / f"ab{i}.npy"
        np.save(f, np.zeros(1))
        os.utime(f, (1000 + i, 1000 + i))
    case, rows = _case()
    with answers.use_disk(True):
        kept_reference(case, rows)
    left = sorted(p.name for p in old.iterdir())
    assert left == ["ab4.npy", "ab5.npy", "ab6.npy"], left  # the 3 most recently used stay (6 // 2)
    assert len(list(store.rglob("*.npy"))) == 4           # and the new answer was written


def test_a_key_is_40_hex_digits_of_sha256_over_names_dtypes_shapes_and_bytes():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    key = answers.digest("v1", {"x": x, "mask": None}, ("shape-case", 2))
    assert len(key) == 40 and int(key, 16) >= 0
    assert key == answers.digest("v1", {"mask": None, "x": x.copy()}, ("shape-case", 2))   # order, copies: same
    assert key == answers.digest("v1", {"x": np.asfortranarray(x), "mask": None}, ("shape-case", 2))
    others = [answers.digest("v2", {"x": x, "mask": None}, ("shape-case", 2)),
              answers.digest("v1", {"x": x, "mask": None}, ("shape-case", 3)),
              answers.digest("v1", {"y": x, "mask": None}, ("shape-case", 2)),
              answers.digest("v1", {"x": x.astype(np.float32), "mask": None}, ("shape-case", 2)),
              answers.digest("v1", {"x": x.reshape(3, 2), "mask": None}, ("shape-case", 2)),
              answers.digest("v1", {"x": x + 1e-300, "mask": None}, ("shape-case", 2)),
              answers.digest("v1", {"x": x}, ("shape-case", 2))]
    assert len({key, *others}) == 1 + len(others)


def test_an_observation_hashes_its_case_once_however_many_mistakes_the_diagnosis_tries(monkeypatch):
    from graders.mutants import diagnose
    from harness.grading.plugin import Observation

    case, _ = _case()
    calls = []
    real = answers.digest
    monkeypatch.setattr(answers, "digest", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    obs = Observation("t", case, np.zeros_like(case.x), False)
    assert obs.case_digest == real("case", case.arrays())
    outs = [diagnose._mutant_answer(obs, frozenset({bug})) for bug in ("scale_sqrt_d", "no_scale", "scale_sqrt_d")]
    assert calls == ["case"]            # once, for all three (and the memo answers the repeated mistake)
    assert outs[0] is outs[2] and outs[0] is not None and not np.array_equal(outs[0], outs[1])


def test_without_keeping_no_case_is_hashed_and_the_answers_are_the_same(store, monkeypatch):
    """The service's fresh seed per submission (keep_answers=False): the sweep's, the large cases' and kv_cache's
    answers are computed directly, with no digest of the case and nothing in the memo, and they are the same."""
    from graders.common import kv
    from harness.grading.process import grade_task

    case, rows = _case()
    kept = kept_reference(case, rows)
    hashed = []
    real = answers.digest
    monkeypatch.setattr(answers, "digest", lambda *a, **k: hashed.append(a[0]) or real(*a, **k))
    answers.forget()
    with answers.use_memo(False):
        assert not answers.keeping()
        fresh = kept_reference(case, rows)
        kv_case = kv.make_case("numpy", np.random.default_rng(3))
        out, (k, v) = kv.full_reference(kv_case)
        assert all(np.array_equal(a, b) for a, b in zip(kv.kept_full_reference(kv_case), (out, k, v)))
    assert answers.keeping() and np.array_equal(fresh, kept) and fresh.flags.writeable
    assert hashed == [] and answers.counts() == {}
    source = Path(__file__).resolve().parent.parent / "reference" / "kv_cache_numpy.py"
    task = {"exercise": "kv_cache", "path": str(source), "track": "numpy", "sandbox": "local", "seed": 99,
            "answers_on_disk": False, "keep_answers": False}
    assert grade_task(task)["report"]["verdict"] == "passed"
    assert hashed == [] and answers.counts() == {}
    assert grade_task(dict(task, keep_answers=True))["report"]["verdict"] == "passed"
    assert hashed and answers.counts().get("computed")
