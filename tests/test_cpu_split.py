"""benchmarks/cpu_split.py charges perf's samples to the right process role and library (synthetic `perf script`
text in the format it asks for: comm, pid/tid, period, event, ip, symbol, library)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from cpu_split import split, where  # noqa: E402

PY = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
NP = "/venv/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"
KERNEL = "[kernel.kallsyms]"


def sample(pid: int, ns: int, sym: str, dso: str, tid: int | None = None) -> str:
    return f"          python {pid}/{tid or pid}    {ns} cpu-clock:ppp:      7f6f1c5af857 {sym} ({dso})"


def fork(child: int, parent: int, thread: bool = False) -> str:
    tid = child + 1 if thread else child
    return f"          python {parent}/{parent}     PERF_RECORD_FORK({child}:{tid}):({parent}:{parent})"


def test_samples_are_charged_by_role_and_library():
    api, grading, zygote, idle_worker, client = 100, 200, 300, 301, 999
    lines = [
        sample(api, 1000, "_PyEval_EvalFrameDefault", PY, tid=105),   # a thread of the API process
        sample(grading, 2000, "DOUBLE_matmul", NP),
        fork(400, zygote),                                            # a worker forked during the run
        sample(400, 3000, "clear_page_erms", KERNEL),
        fork(401, 400),                                               # what that worker forked in turn
        sample(401, 500, "PyArray_Where", NP),
        sample(idle_worker, 700, "_PyEval_EvalFrameDefault", PY),     # forked ahead, before perf started
        sample(zygote, 50, "copy_page_range", KERNEL),
        sample(client, 40, "malloc", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        "         swapper     0/0        2004008 cpu-clock:ppp:  ffffffff8225295b pv_native_safe_halt "
        f"({KERNEL})",
        sample(777, 60, "dockerd_thing", "/usr/bin/dockerd"),
        fork(402, 400, thread=True),                                  # a thread: no process of its own
    ]
    by_lib, by_sym = split("\n".join(lines), api, {grading}, {zygote}, {idle_worker}, client)
    assert dict(by_lib["api"]) == {"python": 1000}
    assert dict(by_lib["grading"]) == {"numpy": 2000}
    assert dict(by_lib["worker"]) == {"kernel": 3000, "numpy": 500, "python": 700}
    assert dict(by_lib["zygote"]) == {"kernel": 50}
    assert dict(by_lib["client"]) == {"libc": 40}
    assert dict(by_lib["idle"]) == {"kernel": 2004008}
    assert dict(by_lib["other"]) == {"other": 60}
    assert by_sym["worker"]["clear_page_erms"] == 3000


def test_libraries_by_file_name():
    assert where(KERNEL) == "kernel"
    assert where(PY) == "python"
    assert where(NP) == "numpy"
    assert where("/x/numpy/random/_pcg64.cpython-311-x86_64-linux-gnu.so") == "numpy"
    assert where("/x/numpy.libs/libscipy_openblas64_-32a4b2a6.so") == "blas"
    assert where("/usr/lib/x86_64-linux-gnu/libc.so.6") == "libc"
    assert where("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6") == "other"
