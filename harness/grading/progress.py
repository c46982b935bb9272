"""The engine's progress events: a pytest plugin that calls ``grade(progress=callback)`` as each test starts.
Showing them is the caller's business (`grade run`: :mod:`harness.cli.progress`)."""

from __future__ import annotations

from typing import Callable


class SuiteProgress:
    """pytest plugin: ``callback(index, total, test_id)`` as each test starts (index from 1), and
    ``callback(total, total, None)`` when the suite is over."""

    def __init__(self, callback: Callable[[int, int, str | None], None]):
        self.callback, self.total, self.index = callback, 0, 0

    def pytest_collection_finish(self, session):
        self.total = len(session.items)

    def pytest_runtest_logstart(self, nodeid, location):
        self.index += 1
        self.callback(self.index, self.total, nodeid.rsplit("::", 1)[-1])

    def pytest_sessionfinish(self, session, exitstatus):
        self.callback(self.total, self.total, None)
