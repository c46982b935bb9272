"""Many graders at once on one machine, the interpreter under /tmp, /tmp churning: every correct submission passes.

A local sandbox that hid /tmp entry by entry once false-failed a correct submission when another grader's
scratch folder vanished between the listing and the mount. The set-up now covers /tmp whole and binds back
only the interpreter's own folders; and a worker that cannot boot is retried, then an infrastructure error.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORRECT = [("mha", "mha_numpy.py"), ("gqa", "gqa_torch.py"), ("masked_mha", "masked_mha_numpy.py"),
           ("cross_attention", "cross_attention_torch.py"), ("gqa", "gqa_numpy.py"), ("mha", "mha_torch.py"),
           ("cross_attention", "cross_attention_numpy.py"), ("masked_mha", "masked_mha_torch.py")]
GRADE = "import sys\nfrom harness.cli import main\nsys.argv[0] = 'grade'\nmain()\n"


@pytest.fixture
def tmp_interpreter():
    """A venv under /tmp whose site-packages chain to this interpreter's (the project and its dependencies)."""
    folder = Path(tempfile.mkdtemp(prefix="grade-stress-venv-", dir="/tmp"))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
        python = folder / "venv" / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        outer = [p for p in {*site.getsitepackages(), site.getusersitepackages()} if os.path.isdir(p)]
        Path(purelib, "chain.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in outer))
        check = subprocess.run([str(python), "-c", "import harness, numpy, sys; print(sys.prefix)"],
                               capture_output=True, text=True, cwd="/")
        assert check.returncode == 0 and check.stdout.strip().startswith("/tmp/"), check.stderr
        yield python
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Churn(threading.Thread):
    """Creates and removes folders and files in /tmp as fast as it can, as other graders and programs do."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.cycles = 0

    def run(self):
        live: list[str] = []
        while not self.stop.is_set():
            # named like a live grader's scratch folders (this process's pid, so no grader sweeps them); about
            # fifty alive at any moment, each one soon removed
            for _ in range(5):
                folder = tempfile.mkdtemp(prefix=f"grade-{os.getpid()}-churn-", dir="/tmp")
                Path(folder, "f").write_text("x")
                live.append(folder)
            fd, path = tempfile.mkstemp(prefix="churn-", dir="/tmp")
            os.close(fd)
            os.unlink(path)
            while len(live) > 50:
                shutil.rmtree(live.pop(0), ignore_errors=True)
            self.cycles += 1
        for folder in live:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.matrix  # a soak run: CI's second invocation (README "Tests")
def test_eight_graders_and_a_batch_at_once_with_tmp_churning(tmp_interpreter, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_SANDBOX", "PYTHONPATH")}
    env["GRADER_SANDBOX"] = "local"
    subs = tmp_path / "subs"
    subs.mkdir()
    for _, name in CORRECT:
        shutil.copy(ROOT / "reference" / name, subs / name)
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    for name in ("mha_numpy.py", "mha_torch.py", "mha_numpy_2.py", "mha_torch_2.py"):
        shutil.copy(ROOT / "reference" / name.replace("_2", ""), batch_dir / name)

    churn = Churn()
    churn.start()
    started = time.monotonic()
    try:
        runs = [subprocess.Popen([str(tmp_interpreter), "-c", GRADE, exercise, str(subs / name), "--json",
                                  str(tmp_path / f"{i}.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env, cwd=tmp_path)
                for i, (exercise, name) in enumerate(CORRECT)]
        batch = subprocess.Popen([str(tmp_interpreter), "-c", GRADE, "batch", str(batch_dir), "--exercise", "mha",
                                  "--out", str(tmp_path / "out"), "--jobs", "2"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        outcomes = [(p.communicate(timeout=900), p.returncode) for p in runs]
        batch_out, batch_rc = batch.communicate(timeout=900), batch.returncode
    finally:
        churn.stop.set()
        churn.join()
    elapsed = time.monotonic() - started
    assert churn.cycles > 10, "the churn did not run alongside the graders"
    for (exercise, name), ((out, err), rc) in zip(CORRECT, outcomes):
        assert rc == 0, f"{exercise} {name}: exit {rc}\n{out}\n{err}"
    for i, (exercise, _) in enumerate(CORRECT):
        report = json.loads((tmp_path / f"{i}.json").read_text())
        assert report["verdict"] == "passed" and report["environment"]["read_only_fs"] in (True, False)
    assert batch_rc == 0, f"batch: exit {batch_rc}\n{batch_out[0]}\n{batch_out[1]}"
    reports = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json") if p.name != "summary.json"]
    assert len([r for r in reports if r.get("verdict") == "passed"]) == 4, [r.get("verdict") for r in reports]
    print(f"8 graders + batch of 4 (--jobs 2) in {elapsed:.1f} s, {churn.cycles} churn cycles")


def test_a_worker_under_a_tmp_interpreter_sees_none_of_the_hosts_tmp(tmp_interpreter, tmp_path):
    """The interpreter's own folder is bound back into the worker's fresh /tmp; nothing else of /tmp is there."""
    from harness.sandbox.local import mount_isolation

    if not mount_isolation():
        pytest.skip("no mount namespace here: the local sandbox cannot replace /tmp (see SECURITY.md)")
    sentinel = Path(tempfile.mkdtemp(prefix="grade-sentinel-", dir="/tmp"))
    try:
        probe = tmp_path / "probe.py"
        # what may show in the worker's /tmp: its own files, and the folders under /tmp that hold the interpreter
        # or the packages it imports (this venv's site-packages when this venv lives under /tmp too)
        tmp = os.path.realpath("/tmp")
        needed = {tmp_interpreter.parents[2].name} | {
            Path(os.path.realpath(p)).relative_to(tmp).parts[0] for p in (sys.prefix, *site.getsitepackages())
            if os.path.realpath(p).startswith(tmp + os.sep)}
        allowed = {".worker", "home", "submission.py", *needed}
        probe.write_text(f"import os\nassert not os.path.exists({str(sentinel)!r}), 'the host /tmp is visible'\n"
                         f"assert set(os.listdir('/tmp')) <= {allowed!r}, os.listdir('/tmp')\n"
                         + (ROOT / "reference" / "mha_numpy.py").read_text())
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([str(tmp_interpreter), "-c", GRADE, "mha", str(probe), "--sandbox", "local"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        shutil.rmtree(sentinel, ignore_errors=True)
