"""Hidden suites collected once per grading process and run again for every submission.

A one-shot grade runs ``pytest.main`` (harness/grading/engine.py): it parses the options, loads the plugins,
configures, imports and collects the suite, runs every test, then unconfigures. In a long-lived grading process
(harness/grading/process.py, what `grade batch` and `grade serve` grade in) only the running depends on the
submission, so :func:`run` keeps a configured, collected pytest session per (suite, exercise, track) and runs
its test items again for each submission: the same real pytest suite, every test, its fixtures set up and torn
down as in a fresh run (the last item's teardown finishes every scope, session included, so no fixture value
outlives a grade). The plugin instance (:class:`GraderPlugin`) is kept with it and rebound to each submission's
candidate and seed.

A kept session that ends abnormally (an infrastructure fault stops the run, pytest raises, the process is told
to stop mid-grade) is finished as ``pytest.main`` would finish it and dropped; the next grade collects afresh.
What reaches the engine is what ``pytest.main`` would give it: an exit code (a stop signal's KeyboardInterrupt
too, as pytest.main answers it; the grading process then stops after the task, harness/core/process.py).

Switched on by :func:`keep` (the grading process's loop calls it); elsewhere the engine runs ``pytest.main``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

_enabled = False
_kept: dict[tuple, "KeptSuite"] = {}


def keep(on: bool = True) -> None:
    """Keep collected suites in this process from now on (``False``: stop, and finish those kept)."""
    global _enabled
    _enabled = on
    if not on:
        close_all()


def enabled() -> bool:
    return _enabled


def close_all() -> None:
    for suite in list(_kept.values()):
        suite.close()
    _kept.clear()


class KeptSuite:
    """One configured and collected pytest session of a hidden suite, with its plugin."""

    def __init__(self, args: list[str], plugin):
        import pytest
        from _pytest.config import _prepareconfig

        self.plugin = plugin
        self.config = _prepareconfig(list(args), [plugin])
        self.session = pytest.Session.from_config(self.config)
        self._state = 0          # 1: configured, 2: session started (what pytest's wrap_session tracks)
        try:
            self.config._do_configure()
            self._state = 1
            self.config.hook.pytest_sessionstart(session=self.session)
            self._state = 2
            self.config.hook.pytest_collection(session=self.session)
        except BaseException:
            self.close()
            raise

    def run(self) -> int:
        """Run every collected item once; pytest's exit code as ``pytest.main`` would give it. The session is
        left ready for the next run only when the run went through to the end (``self.reusable``)."""
        import pytest

        s = self.session
        s.shouldstop = s.shouldfail = False
        s.testsfailed = 0
        s.exitstatus = pytest.ExitCode.OK
        self.reusable = False
        try:
            self.config.hook.pytest_runtestloop(session=s)
        except s.Failed:
            return int(pytest.ExitCode.TESTS_FAILED)
        except (s.Interrupted, KeyboardInterrupt):   # as pytest.main answers them: an exit code, not a raise (a
            return int(pytest.ExitCode.INTERRUPTED)   # stop signal mid-grade ends the process after this task)
        except Exception:
            return int(pytest.ExitCode.INTERNAL_ERROR)
        self.reusable = True
        if s.testsfailed:
            return int(pytest.ExitCode.TESTS_FAILED)
        if s.testscollected == 0:
            return int(pytest.ExitCode.NO_TESTS_COLLECTED)
        return int(pytest.ExitCode.OK)

    def close(self) -> None:
        """Finish the session as ``pytest.main`` does (what is still set up is torn down), then unconfigure."""
        try:
            if self._state >= 2:
                self.config.hook.pytest_sessionfinish(session=self.session, exitstatus=self.session.exitstatus)
        except Exception:
            pass
        finally:
            self._state = 0
            try:
                self.config._ensure_unconfigure()
            except Exception:
                pass


def run(key: tuple, args: list[str], make_plugin: Callable[[], object], rebind: Callable[[object], None]
        ) -> tuple[int, object]:
    """Run the suite ``args`` names with the kept session for ``key`` (collected now when there is none):
    ``make_plugin()`` makes the plugin a new session is configured with, ``rebind(plugin)`` points it at this
    submission before the run. (exit code, plugin). A session whose collection failed or whose run did not
    finish normally is not kept."""
    import pytest

    suite = _kept.pop(key, None)
    if suite is None:
        plugin = make_plugin()
        try:
            suite = KeptSuite(args, plugin)
        except pytest.UsageError:            # what pytest.main answers with an exit code
            return int(pytest.ExitCode.USAGE_ERROR), plugin
        except KeyboardInterrupt:
            return int(pytest.ExitCode.INTERRUPTED), plugin
        except Exception:
            return int(pytest.ExitCode.INTERNAL_ERROR), plugin
        if plugin.collection_errors:
            suite.close()
            return int(pytest.ExitCode.USAGE_ERROR), plugin
    rebind(suite.plugin)
    try:
        code = suite.run()
    except BaseException:    # what is set up is torn down, nothing is kept
        suite.close()
        raise
    if suite.reusable and not suite.plugin.infra_faults:
        _kept[key] = suite
    else:
        suite.close()
    return code, suite.plugin


def key_for(suite: Path, exercise: str, track: str) -> tuple:
    return str(suite), exercise, track
