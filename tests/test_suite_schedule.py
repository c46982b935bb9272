"""How xdist hands out the suite (tests/parallel.py, issue 24): the lists name real test files, heavy files go
first and the spread files' tests last, and only the spread files' tests are work units of their own."""

from __future__ import annotations

from pathlib import Path

from tests.parallel import HEAVY_FIRST, SPREAD, SpreadFileScheduling, run_order

ROOT = Path(__file__).resolve().parent.parent


def test_the_lists_name_existing_test_files_once():
    for path in HEAVY_FIRST + SPREAD:
        assert (ROOT / path).is_file(), path
    assert not set(HEAVY_FIRST) & set(SPREAD)
    assert len(set(HEAVY_FIRST)) == len(HEAVY_FIRST) and len(set(SPREAD)) == len(SPREAD)


def test_heavy_files_first_spread_tests_last_a_files_order_kept():
    ids = ["tests/test_cli.py::test_b", "tests/test_mutants.py::test_x[1]", "tests/test_cli.py::test_a",
           HEAVY_FIRST[1] + "::test_z", HEAVY_FIRST[0] + "::test_y", "tests/test_mutants.py::test_x[0]"]
    assert sorted(ids, key=run_order) == [
        HEAVY_FIRST[0] + "::test_y", HEAVY_FIRST[1] + "::test_z", "tests/test_cli.py::test_b",
        "tests/test_cli.py::test_a", "tests/test_mutants.py::test_x[1]", "tests/test_mutants.py::test_x[0]"]


def test_only_spread_files_are_split_into_single_tests():
    split = SpreadFileScheduling._split_scope
    assert split(None, "tests/test_cli.py::test_a") == "tests/test_cli.py"
    assert split(None, "tests/test_mutants.py::test_x[mha-numpy-no_scale]") == \
        "tests/test_mutants.py::test_x[mha-numpy-no_scale]"
