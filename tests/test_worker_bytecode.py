"""Issue 27: a local worker starts from bytecode the host compiled once and kept, never from a stale one; and its
command line is read without argparse."""

import importlib.util
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.sandbox import bytecode, mount_setup
from harness.sandbox.base import WORKER_DIR, WORKER_FILES


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache" / "answers"))
    monkeypatch.setattr(bytecode, "_memo", {})


def forged(real_source: bytes, body: str) -> bytes:
    """A checked hash-based .pyc that claims ``real_source`` but holds the code of ``body``: whoever runs it instead
    of compiling the source shows it."""
    return (importlib.util.MAGIC_NUMBER + bytecode.HASH_CHECKED + importlib.util.source_hash(real_source)
            + marshal.dumps(compile(body, "x.py", "exec")))


def test_copied_scripts_carry_bytecode_that_python_imports_without_compiling(tmp_path):
    dst = tmp_path / "worker"
    dst.mkdir()
    bytecode.copy_scripts(WORKER_DIR, WORKER_FILES, str(dst))
    for name in WORKER_FILES:
        assert (dst / name).read_bytes() == (WORKER_DIR / name).read_bytes()
        pyc = (dst / "__pycache__" / bytecode.pyc_name(name)).read_bytes()
        assert bytecode.valid(pyc, (WORKER_DIR / name).read_bytes())
    # the worker's own flags (-B: nothing written): import reads wire's bytecode, as -v says
    out = subprocess.run([sys.executable, "-I", "-S", "-B", "-v", "-c",
                          f"import sys; sys.path.insert(0, {str(dst)!r}); "
                          f"sys.path.append({str(Path(importlib.util.find_spec('numpy').origin).parent.parent)!r});"
                          "import wire"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"code object from '{dst / '__pycache__' / bytecode.pyc_name('wire.py')}'" in out.stderr


def test_compiled_bytes_are_kept_on_disk_and_a_damaged_copy_is_replaced(tmp_path):
    source = b"X = 1\n"
    first = bytecode.compiled("s.py", source)
    kept = list(bytecode.cache_dir().glob("s.py-*.pyc"))
    assert len(kept) == 1 and kept[0].read_bytes() == first
    bytecode._memo.clear()
    kept[0].write_bytes(forged(source, "X = 'from the cache'"))  # a valid file there is what the next process reads
    assert bytecode.compiled("s.py", source) == kept[0].read_bytes()
    bytecode._memo.clear()
    kept[0].write_bytes(first[:20])  # cut short: compiled again, and rewritten
    again = bytecode.compiled("s.py", source)
    assert bytecode.valid(again, source) and kept[0].read_bytes() == again
    assert bytecode.compiled("s.py", b"X = 2\n") != again  # another source, another entry
    assert len(list(bytecode.cache_dir().glob("s.py-*.pyc"))) == 2


def test_the_set_up_runs_the_scripts_bytecode_only_while_it_matches_the_source(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("X = 'source'\n")
    (tmp_path / "__pycache__").mkdir()
    pyc = tmp_path / "__pycache__" / bytecode.pyc_name("w.py")

    def x() -> str:
        code = mount_setup.script_code(str(script))
        assert code.co_filename == str(script)  # tracebacks and warnings name the script, as from its source
        scope: dict = {}
        exec(code, scope)
        return scope["X"]

    assert x() == "source"  # no bytecode
    pyc.write_bytes(forged(script.read_bytes(), "X = 'bytecode'"))
    assert x() == "bytecode"
    script.write_text("X = 'edited'\n")  # the source changed: its hash no longer matches
    assert x() == "edited"
    pyc.write_bytes(forged(script.read_bytes(), "X = 'bytecode'")[:-3])  # damaged: not loadable
    assert x() == "edited"
    pyc.write_bytes(b"\0\0\0\0" + forged(script.read_bytes(), "X = 'bytecode'")[4:])  # another interpreter's
    assert x() == "edited"


def test_the_set_up_runs_the_script_as_main_with_its_argv(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("import sys\nprint(__name__, __file__ == sys.argv[0], sys.argv[1:], "
                      "sys.modules['__main__'].__dict__ is globals())\n")
    out = subprocess.run([sys.executable, "-I", "-S", "-B", "-c",
                          f"import sys; sys.path.insert(0, {str(Path(mount_setup.__file__).parent)!r}); "
                          f"import mount_setup; mount_setup.run_script([{str(script)!r}, '--a', 'b'])"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "__main__ True ['--a', 'b'] True"


@pytest.mark.parametrize("args, message", [
    (["--entry", "mha", "sub.py"], "--track must be one of"),
    (["--track", "jax", "--entry", "mha", "sub.py"], "--track must be one of"),
    (["--track", "numpy", "--entry", "mha"], "--entry and SUBMISSION are required"),
    (["--track", "numpy", "--warm", "--exchange-fd", "three"], "--exchange-fd: invalid value 'three'"),
    (["--track", "numpy", "--warm", "--root"], "--root expects a value"),
    (["--track", "numpy", "--warm", "--bogus"], "unrecognized argument '--bogus'"),
    (["--track", "numpy", "--entry", "mha", "a.py", "b.py"], "unrecognized argument 'b.py'"),
])
def test_a_malformed_worker_command_line_exits_2_with_its_usage(args, message):
    out = subprocess.run([sys.executable, "-I", str(WORKER_DIR / "worker.py"), *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: worker.py --track {numpy,torch,python}")
    assert f"worker.py: error: {message}" in out.stderr


BYTECODE_FACTS = """import os, sys
folder = os.path.dirname(sys.modules["__main__"].__file__)
print("FACTS", sorted(os.listdir(os.path.join(folder, "__pycache__"))), file=sys.stderr, flush=True)
"""


def test_a_local_worker_finds_its_scripts_bytecode_beside_them_in_its_box(tmp_path):
    """End to end: the bytecode the host wrote is carried onto the worker's own tmpfs (mount_setup.py copies the
    folder whole), where the worker runs; the unit tests above show it is used there only while it matches."""
    from .helpers import namespaced_worker_facts

    facts = namespaced_worker_facts(tmp_path, BYTECODE_FACTS)
    assert facts.strip() == str(sorted(bytecode.pyc_name(n) for n in WORKER_FILES))


def test_the_cache_keeps_only_the_newest_files(monkeypatch):
    """Every edited script (or upgrade) adds a file that is never read again: the folder keeps the KEEP newest."""
    monkeypatch.setattr(bytecode, "KEEP", 3)
    for i in range(6):
        bytecode.compiled("s.py", f"X = {i}\n".encode())
        newest = max(bytecode.cache_dir().glob("*.pyc"), key=lambda p: p.stat().st_mtime_ns)
        os.utime(newest, ns=(i * 10**9, i * 10**9))  # a clear order, whatever the clock's resolution
    left = sorted(bytecode.cache_dir().glob("*.pyc"), key=lambda p: p.stat().st_mtime)
    assert len(left) == 3
    assert [bytecode.valid(p.read_bytes(), f"X = {i}\n".encode()) for p, i in zip(left, (3, 4, 5))] == [True] * 3
