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
