"""What a test needs to run beside others under pytest-xdist (`python -m pytest -n N`): which worker it is on,
and the per-worker resources derived from that (README "Tests")."""

from __future__ import annotations

import os


def worker_index() -> int:
    """0 without pytest-xdist or on its first worker (gw0), n on worker gw<n>."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def redis_db(slot: int = 0) -> int:
    """A database of the test Redis that belongs to this pytest process: each xdist worker has four (db 0 is
    left to whoever else uses that Redis). Slot 0 is the ``redis_url`` fixture's, flushed around every test; a
    module-scoped fixture that keeps a database across tests (other files' tests run in between on the same
    worker) takes slot 1, 2 or 3. Deterministic, and no two workers of one run share a database (up to 15)."""
    return 1 + (worker_index() * 4 + slot) % 60


def subnet_octet(seed: int) -> int:
    """The third octet of a test's private 10.213.x.0/24 addresses: a band of 25 per xdist worker (workers
    never collide), ``seed`` picks within it (tests of one worker run one at a time)."""
    return 1 + (worker_index() * 25 + seed % 25) % 250


# -- how xdist hands out the suite (`-n auto --dist loadfile`, refined by SpreadFileScheduling) -----------------
# A file's tests go to one worker, in order, and share its module-scoped set-up (a server, a browser, a cluster),
# except in SPREAD: files of independent, individually slow tests (one grading each) that would otherwise set the
# suite's floor on one worker; their tests go one by one to whichever worker is free. Work goes out heaviest
# first (HEAVY_FIRST, measured: README "Tests", benchmarks/suite_times.py), then the other files in file order,
# then the SPREAD tests (longest single tests first), which fill the tail.
SPREAD = ("tests/test_service_schemathesis.py", "tests/test_redteam.py", "tests/test_mutants.py",
          "tests/test_variants.py", "tests/test_real_code.py", "tests/test_shape_sweep.py")
HEAVY_FIRST = ("tests/test_service_distributed.py", "tests/test_service_parity.py", "tests/test_warm.py",
               "tests/test_batch.py", "tests/test_host_facts.py", "tests/test_docker_grading.py",
               "tests/test_reports_html.py", "tests/test_host_faults.py", "tests/test_service_crash.py",
               "tests/test_kit.py")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def run_order(nodeid: str) -> tuple[int, int]:
    """The sort key of a test in the collection (stable: a file's tests keep their order)."""
    path = file_of(nodeid)
    if path in HEAVY_FIRST:
        return 0, HEAVY_FIRST.index(path)
    return (2, SPREAD.index(path)) if path in SPREAD else (1, 0)


try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # pragma: no cover - pytest-xdist is a test dependency; without it nothing is scheduled
    LoadFileScheduling = object


class SpreadFileScheduling(LoadFileScheduling):
    """--dist loadfile, but a SPREAD file's tests are work units of their own, and the units go out in the
    collection's order (run_order), not xdist's default largest-count-first."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        path = file_of(nodeid)
        return nodeid if path in SPREAD else path
