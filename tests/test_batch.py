"""`grade batch`: a folder of passing, failing, crashing and hostile submissions; JUnit and Gradescope output;
SIGKILL mid-run and --resume (every submission ends with exactly one valid report, none graded twice)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import descendants, validate

ROOT = Path(__file__).resolve().parent.parent
REF_NP = (ROOT / "reference" / "mha_numpy.py").read_text()
REF_TORCH = (ROOT / "reference" / "mha_torch.py").read_text()
WRONG_SCALE = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
LOOP = "def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    while True:\n        pass\n"
FLOOD = ("import sys\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    while True:\n"
         "        sys.stdout.write('\\x1b[31mflood' * 10000)\n")
CRASH = "import numpy as np\nimport no_such_module_anywhere\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    return X\n"
REPORT_RE = re.compile(r"^(?P<slug>.+)\.(?P<sha>[0-9a-f]{16})\.json$")
GS_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
          "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GS_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
           "visibility", "extra_data"}
GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def batch(cwd: Path, *args, env=None, timeout=300):
    return subprocess.run(["grade", "batch", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, **(env or {})})


def reports(out: Path) -> dict[str, list[dict]]:
    """slug -> the reports found for it (there must be exactly one each)."""
    found: dict[str, list[dict]] = {}
    for f in sorted(out.glob("*.json")):
        m = REPORT_RE.match(f.name)
        assert m, f"unexpected file in the report folder: {f.name}"
        data = json.loads(f.read_text())
        validate(data)
        assert data["submission"]["sha256"].startswith(m["sha"])
        found.setdefault(m["slug"], []).append(data)
    return found


def starts(log: Path) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    return [tuple(line.split("\t")[1:3]) for line in log.read_text().splitlines() if line.startswith("start\t")]


@pytest.fixture
def mixed(tmp_path):
    subs = tmp_path / "subs"
    (subs / "team_b").mkdir(parents=True)
    (subs / ".hidden").mkdir()
    files = {"pass_numpy.py": REF_NP, "team_b/pass_torch.py": REF_TORCH, "wrong_scale.py": WRONG_SCALE,
             "crash_import.py": CRASH, "infinite_loop.py": LOOP, "stdout_flood.py": FLOOD}
    for name, text in files.items():
        (subs / name).write_text(text)
    (subs / "binary.py").write_bytes(b"def mha():\x00\x01 return 1\n")  # the engine refuses it: an error report
    (subs / "notes.txt").write_text("not a submission")
    (subs / ".hidden" / "skipped.py").write_text(REF_NP)
    return tmp_path


@pytest.mark.slow
def test_mixed_folder_counts_exit_code_reports_junit_and_gradescope(mixed):
    from junitparser import Error, Failure, JUnitXml

    r = batch(mixed, "subs", "--exercise", "mha", "--sandbox", "local", "--jobs", "2", "--timeout", "1",
              "--out", "out", "--junit", "out/junit.xml", "--gradescope")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 passed, 3 failed, 2 errored" in r.stdout
    assert "[7/7]" in r.stderr and "ETA" in r.stderr  # the non-terminal progress: one line per submission

    found = reports(mixed / "out")
    assert set(found) == {"subs__pass_numpy.py", "subs__team_b__pass_torch.py", "subs__wrong_scale.py",
                          "subs__crash_import.py", "subs__infinite_loop.py", "subs__stdout_flood.py",
                          "subs__binary.py"}
    assert all(len(v) == 1 for v in found.values())
    rep = {slug.removeprefix("subs__").removesuffix(".py"): v[0] for slug, v in found.items()}
    assert rep["pass_numpy"]["verdict"] == "passed" and rep["pass_numpy"]["track"] == "numpy"
    assert rep["team_b__pass_torch"]["verdict"] == "passed" and rep["team_b__pass_torch"]["track"] == "torch"
    assert rep["wrong_scale"]["verdict"] == "failed"
    assert [d["bug"] for d in rep["wrong_scale"]["diagnosis"]] == ["scale_sqrt_d"]
    assert rep["crash_import"]["verdict"] == "error"
    assert {t["status"] for t in rep["infinite_loop"]["tests"]} <= {"timeout", "error"}
    assert "timeout" in {t["status"] for t in rep["infinite_loop"]["tests"]}
    assert "output_limit" in {t["status"] for t in rep["stdout_flood"]["tests"]}
    assert rep["binary"]["verdict"] == "error"
    assert rep["binary"]["environment"]["batch"]["error"]["kind"] == "usage"
    assert "binary" in rep["binary"]["environment"]["batch"]["error"]["message"]
    # the plots' arrays sit next to the failing report and match its recorded hash
    art = rep["wrong_scale"]["artifacts"]
    assert (mixed / "out" / art["file"]).is_file() and art["items"]
    assert not list((mixed / "out").glob(".*.tmp"))

    xml = JUnitXml.fromfile(str(mixed / "out" / "junit.xml"))
    suites = {s.name: s for s in xml}
    assert len(suites) == 7
    wrong = suites["subs/wrong_scale.py"]
    failed = sum(t["status"] == "failed" for t in rep["wrong_scale"]["tests"])   # the suite grows: count, don't pin
    assert wrong.tests == len(rep["wrong_scale"]["tests"]) and wrong.failures == failed > 0
    failure_texts = [res.text for case in wrong for res in case.result if isinstance(res, Failure)]
    assert failure_texts and all("scale_sqrt_d" in t and "hint:" in t for t in failure_texts)
    assert suites["subs/pass_numpy.py"].failures == 0 and suites["subs/pass_numpy.py"].errors == 0
    binary = suites["subs/binary.py"]
    assert binary.tests == 1 and any(isinstance(res, Error) for case in binary for res in case.result)
    loop_types = {res.type for case in suites["subs/infinite_loop.py"] for res in case.result}
    assert "timeout" in loop_types

    for slug, data in found.items():
        gs = json.loads((mixed / "out" / "gradescope" / slug / "results.json").read_text())
        assert set(gs) <= GS_TOP and {"score", "tests", "execution_time"} <= set(gs)
        assert gs["score"] == data[0]["score"]
        assert isinstance(gs["execution_time"], int)
        assert len(gs["tests"]) == len(data[0]["tests"])
        for t, src in zip(gs["tests"], data[0]["tests"]):
            assert set(t) <= GS_TEST
            assert {"name", "score", "max_score", "status", "visibility", "output"} <= set(t)
            assert t["status"] in ("passed", "failed") and t["visibility"] in GS_VISIBILITY
            assert t["name"] == src["id"] and t["score"] == src["points"] and t["max_score"] == src["max_points"]
            assert (t["status"] == "passed") == (src["status"] == "passed")


def test_all_passing_exits_0_and_resume_skips_everything(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(3):
        (subs / f"cand{i}.py").write_text(f"# candidate {i}\n{REF_NP}")
    log = tmp_path / "starts.log"
    r = batch(tmp_path, "subs", "--exercise", "mha", "--sandbox", "local", "-j", "2", "--out", "out",
              env={"ATTN_GRADER_BATCH_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(starts(log)) == 3
    mtimes = {f: f.stat().st_mtime_ns for f in (tmp_path / "out").glob("*.json")}
    r = batch(tmp_path, "subs", "--exercise", "mha", "--sandbox", "local", "--out", "out", "--resume",
              env={"ATTN_GRADER_BATCH_LOG": str(log)})
    assert r.returncode == 0 and "3 resumed" in r.stdout
    assert len(starts(log)) == 3  # nothing graded again
    assert {f: f.stat().st_mtime_ns for f in (tmp_path / "out").glob("*.json")} == mtimes

    # an edited submission is graded again and its old report is replaced, not kept alongside
    (subs / "cand1.py").write_text(WRONG_SCALE)
    r = batch(tmp_path, "subs", "--exercise", "mha", "--sandbox", "local", "--out", "out", "--resume",
              env={"ATTN_GRADER_BATCH_LOG": str(log)})
    assert r.returncode == 1
    assert [s[1] for s in starts(log)[3:]] == ["subs/cand1.py"]
    found = reports(tmp_path / "out")
    assert all(len(v) == 1 for v in found.values()) and found["subs__cand1.py"][0]["verdict"] == "failed"
    # a different exercise or track is a different key: not resumed
    r = batch(tmp_path, "subs/cand0.py", "--exercise", "mha", "--track", "torch", "--sandbox", "local",
              "--out", "out", "--resume", env={"ATTN_GRADER_BATCH_LOG": str(log)})
    assert len(starts(log)) == 5


def test_infrastructure_fault_is_an_error_report_exit_3_and_retried_on_resume(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.py").write_text(REF_NP)
    log = tmp_path / "starts.log"
    env = {"ATTN_GRADER_BATCH_LOG": str(log), "GRADER_SANDBOX_IMAGE": "attn-grader-sandbox:no-such-tag-for-tests"}
    r = batch(tmp_path, "subs", "--exercise", "mha", "--sandbox", "docker", "--out", "out", env=env)
    assert r.returncode == 3, r.stdout + r.stderr
    (data,) = reports(tmp_path / "out")["subs__a.py"]
    assert data["verdict"] == "error" and data["environment"]["batch"]["error"]["kind"] == "infrastructure"
    r = batch(tmp_path, "subs", "--exercise", "mha", "--sandbox", "docker", "--out", "out", "--resume", env=env)
    assert r.returncode == 3 and len(starts(log)) == 2  # not the submission's verdict: tried again


def test_usage_errors_exit_2(tmp_path):
    (tmp_path / "a.py").write_text(REF_NP)
    r = batch(tmp_path, "a.py", "--exercise", "mhaa", "--out", "out")
    assert r.returncode == 2 and "grade: error:" in r.stderr
    r = batch(tmp_path, "missing_dir", "--exercise", "mha", "--out", "out")
    assert r.returncode == 2 and "does not exist" in r.stderr
    (tmp_path / "empty").mkdir()
    r = batch(tmp_path, "empty", "--exercise", "mha", "--out", "out")
    assert r.returncode == 2 and "no submissions" in r.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _described(pid: int):
    """What a process that should be gone is doing: command line, kernel wait channel, state and signal masks,
    open descriptors (a pipe end held elsewhere keeps a reader waiting)."""
    try:
        fds = {}
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                fds[fd.name] = os.readlink(fd)
            except OSError:
                pass
        status = [ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if ln.startswith(("State", "PPid", "SigCgt", "SigIgn", "SigBlk"))]
        return Path(f"/proc/{pid}/cmdline").read_bytes()[:80], Path(f"/proc/{pid}/wchan").read_text(), status, fds
    except OSError:
        return "gone"


def _grading_pids(log: Path) -> set[int]:
    return {int(line.split("\t")[3]) for line in log.read_text().splitlines() if line.startswith("start\t")}


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_exactly_one_valid_report_each(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    slow = "import time\n_sleep = time.sleep\n"
    n = 8
    for i in range(n):  # distinct files, each ~0.5 s to grade: a kill lands mid-run
        body = REF_NP if i % 2 == 0 else WRONG_SCALE
        body = body.replace("def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n",
                            "def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    _sleep(0.01)\n", 1)
        (subs / f"cand{i:02d}.py").write_text(f"# candidate {i}\n{slow}{body}")
    log = tmp_path / "starts.log"
    env = {**os.environ, "ATTN_GRADER_BATCH_LOG": str(log)}
    cmd = ["grade", "batch", "subs", "--exercise", "mha", "--sandbox", "local", "--out", "out", "--resume",
           "--jobs", "2"]
    out = tmp_path / "out"
    in_flight: list[str] = []
    for kill_after in (3, 3):  # kill twice (the second time during a resumed run), then finish
        before = {v[0]["submission"]["sha256"] for v in reports(out).values()} if out.exists() else set()
        n0 = len(starts(log))
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(starts(log)) < n0 + kill_after and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "the batch finished before it could be killed"
        tree = descendants({proc.pid})
        assert tree & _grading_pids(log)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # the grading processes and their sandbox workers die with the batch (PDEATHSIG + SIGTERM cleanup) ...
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in tree | _grading_pids(log)) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = {p: _described(p) for p in tree | _grading_pids(log) if _alive(p)}
        assert not alive, alive   # what each still does: its command, wait channel, signal masks, descriptors
        # ... and whatever is on disk is complete: every report parses and validates, never two for one file
        done = reports(out)
        assert all(len(v) == 1 for v in done.values())
        after = {v[0]["submission"]["sha256"] for v in done.values()}
        run = [sha for sha, _ in starts(log)[n0:]]
        assert len(run) == len(set(run)) and not set(run) & before   # a resumed run skips finished ones
        assert len(after) < n
        in_flight += [sha for sha in run if sha not in after]        # killed mid-grading: no report

    before = {v[0]["submission"]["sha256"] for v in reports(out).values()}
    n0 = len(starts(log))
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    final = reports(out)
    assert len(final) == n and all(len(v) == 1 for v in final.values())
    assert {v[0]["verdict"] for v in final.values()} == {"passed", "failed"}
    run = [sha for sha, _ in starts(log)[n0:]]
    assert sorted(run) == sorted({v[0]["submission"]["sha256"] for v in final.values()} - before)
    # sandbox starts per submission: one finished grading each, plus one per kill that interrupted it
    per_sha: dict[str, int] = {}
    for sha, _ in starts(log):
        per_sha[sha] = per_sha.get(sha, 0) + 1
    for v in final.values():
        sha = v[0]["submission"]["sha256"]
        assert per_sha[sha] == 1 + in_flight.count(sha), (sha, per_sha[sha], in_flight)
    assert not list(out.glob(".*.tmp"))


def test_throughput_benchmark_script_runs(tmp_path):
    """The benchmark (not timed here) runs end to end on a tiny corpus."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_batch.py"), "--copies", "1",
                        "--jobs", "1", "--sandbox", "local", "--tracks", "numpy"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "jobs=1" in r.stdout


def test_sigterm_stops_cleanly_with_exit_130_and_no_survivors(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(3):
        (subs / f"loop{i}.py").write_text(f"# {i}\n{LOOP}")
    log = tmp_path / "starts.log"
    proc = subprocess.Popen(["grade", "batch", "subs", "--exercise", "mha", "--sandbox", "local", "--jobs", "2",
                             "--out", "out"], cwd=tmp_path, env={**os.environ, "ATTN_GRADER_BATCH_LOG": str(log)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(starts(log)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # both gradings are inside the candidate's infinite loop now
    tree = descendants({proc.pid})
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "re-run with --resume" in out
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in tree)
    assert reports(tmp_path / "out") == {}  # nothing finished, nothing half-written


def test_summary_says_why_a_row_errored(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "crash.py").write_text(CRASH)
    (subs / "binary.py").write_bytes(b"def mha():\x00\x01 return 1\n")
    r = batch(tmp_path, "subs", "--exercise", "mha", "--sandbox", "local", "--out", "out")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {name: next(ln for ln in r.stdout.splitlines() if f"subs/{name}.py" in ln) for name in ("crash", "binary")}
    assert "error" in rows["crash"] and "No module named 'no_such_module_anywhere'" in rows["crash"]
    # the row says why; its message is cut at the table's width, which a long temporary path (xdist's) can reach
    why = rows["binary"].split("usage:", 1)[1]
    assert "binary" in why or ("…" in why and any("binary" in v[0]["environment"]["batch"]["error"]["message"]
                                                   for k, v in reports(tmp_path / "out").items() if "binary" in k))


def test_symlinks_are_refused_not_followed(tmp_path):
    """Issue 28 #8: ``solution.py -> a secret`` in a submissions folder (or named on the command line) is never
    read: its report is an error saying it is a link, and the secret appears nowhere in the output."""
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-material-4242\n")
    subs = tmp_path / "subs" / "alice"
    subs.mkdir(parents=True)
    (subs / "solution.py").symlink_to(secret)
    (tmp_path / "bob.py").symlink_to(secret)
    out = tmp_path / "out"
    r = batch(tmp_path, "subs", "bob.py", "-e", "mha", "--out", out, "--sandbox", "local")
    assert r.returncode == 1 or r.returncode == 2, r.stderr + r.stdout
    found = reports(out)
    assert sorted(found) == ["bob.py", "subs__alice__solution.py"], found
    for (data,) in found.values():
        validate(data)
        err = data["environment"]["batch"]["error"]
        assert data["verdict"] == "error" and err["kind"] == "usage" and "symbolic link" in err["message"]
        assert data["tests"] == []
    for f in out.rglob("*"):
        if f.is_file():
            assert "secret-material-4242" not in f.read_text(errors="replace"), f
    assert "secret-material-4242" not in r.stdout + r.stderr


def test_a_python_track_batch_with_warm_workers_and_gradescope(tmp_path):
    """attention_cost through the batch: a zygote for the python track, one report per file, Gradescope output."""
    from graders.mutants.build import write_mutant

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ref.py").write_text((ROOT / "reference" / "attention_cost_python.py").read_text())
    write_mutant(subs, "attention_cost", "python", {"cost_wo_forgotten"})
    out = tmp_path / "out"
    r = batch(tmp_path, "subs", "--exercise", "attention_cost", "--out", out, "--sandbox", "local", "--gradescope")
    assert r.returncode == 1, r.stderr
    found = {slug: rs[0] for slug, rs in reports(out).items()}
    assert len(found) == 2 and {d["track"] for d in found.values()} == {"python"}
    by_verdict = {d["verdict"]: d for d in found.values()}
    assert by_verdict["passed"]["score"] == by_verdict["passed"]["max_score"] > 0
    assert [d["bug"] for d in by_verdict["failed"]["diagnosis"]] == ["cost_wo_forgotten"]
    assert all(d["environment"].get("warm") for d in found.values())
    assert len(list((out / "gradescope").glob("*/results.json"))) == 2
