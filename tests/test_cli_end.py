"""A one-shot grade ends without the interpreter's teardown (harness.cli.common.end_now, issue 27), but only after
everything the interpreter's own exit does first: threads joined, atexit handlers run, output flushed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REF_NUMPY = ROOT / "reference" / "mha_numpy.py"

# An object whose finaliser runs only in the interpreter's teardown of the module's globals.
TORN = """
class Torn:
    def __del__(self, _open=open, _marker={marker!r}):  # bound now: the teardown clears builtins and globals
        with _open(_marker, "w") as f:
            f.write("torn down")
keep = Torn()
"""


def test_end_now_does_what_exit_does_before_the_teardown_then_ends(tmp_path):
    script = TORN.format(marker=str(tmp_path / "teardown")) + f"""
import atexit, concurrent.futures, sys, threading, time
from pathlib import Path
from harness.cli.common import end_now

out = Path({str(tmp_path)!r})
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late():
    time.sleep(0.3)
    (out / "thread").write_text("joined")
threading.Thread(target=late).start()                      # a non-daemon thread: joined, as at exit
concurrent.futures.ThreadPoolExecutor(1).submit(time.sleep, 0.1)  # an executor's thread: stopped, never waited on
sys.stdout.write("buffered, no newline")
end_now(7)
print("not reached")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (7, "buffered, no newline"), done.stderr
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"
    assert not (tmp_path / "teardown").exists()  # the teardown did not run: that is the time saved


@pytest.mark.parametrize("command, ends_now", [(["mha", str(REF_NUMPY), "--sandbox", "local", "-q"], True),
                                               (["list"], False)], ids=["one-shot grade", "list"])
def test_only_the_one_shot_grade_run_as_the_command_ends_now(tmp_path, command, ends_now):
    script = TORN.format(marker=str(tmp_path / "teardown")) + "from harness.cli import main\nmain()\n"
    report = tmp_path / "report.json"
    args = [*command, "--json", str(report)] if ends_now else command
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "teardown").exists() is not ends_now
    if ends_now:  # what it wrote and printed is all there
        assert json.loads(report.read_text())["verdict"] == "passed"
        assert done.stdout.startswith("mha (numpy track): PASSED")
    else:
        assert "flash_attention" in done.stdout


RECORD = """
import json, sys
import harness.grading.engine as engine
real = engine.grade
def grade(**kw):
    with open({marker!r}, "w") as f:
        json.dump(kw.get("ends_process"), f)
    return real(**kw)
engine.grade = grade
"""


def test_the_one_shot_grade_says_it_ends_the_process_only_when_it_is_the_command(tmp_path, monkeypatch):
    """`grade mha FILE` as the command grades with ends_process (a Docker container's end is handed off, not
    waited for); the same command called in-process (CliRunner, a library's caller) does not."""
    from click.testing import CliRunner

    from harness.cli import main

    marker = tmp_path / "ends_process"
    script = RECORD.format(marker=str(marker)) + "from harness.cli import main\nmain()\n"
    done = subprocess.run([sys.executable, "-c", script, "mha", str(REF_NUMPY), "--sandbox", "local", "-q"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(marker.read_text()) is True
    marker.unlink()
    import harness.grading.engine as engine

    monkeypatch.setattr(engine, "grade", engine.grade)  # the real one is put back after the test
    exec(RECORD.format(marker=str(marker)), {})  # the same recorder, in this process
    result = CliRunner().invoke(main, ["mha", str(REF_NUMPY), "--sandbox", "local", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(marker.read_text()) is False
