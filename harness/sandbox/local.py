"""Local process sandbox: a fresh temp dir, rlimits, a scrubbed environment, a network and PID namespace
when the machine allows it. Convenient on a laptop; NOT an isolation boundary (see SECURITY.md)."""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .base import WORKER_DIR, WORKER_FILES, Limits, Sandbox, WorkerHandle

KEEP_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LD_LIBRARY_PATH")


@functools.lru_cache(maxsize=1)
def namespace_prefix() -> tuple[str, ...]:
    """``unshare`` arguments for a private network + PID namespace, or () where not permitted."""
    exe = shutil.which("unshare")
    if not exe:
        return ()
    for args in ((exe, "--net", "--pid", "--fork", "--kill-child"),
                 (exe, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child")):
        try:
            ok = subprocess.run((*args, "true"), capture_output=True, timeout=5).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return args
    return ()


def scrubbed_env(home: str) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    env.update({k: os.environ[k] for k in KEEP_ENV if k in os.environ})
    return env


def _limit_resources(limits: Limits) -> None:  # runs in the child between fork and exec
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_mb * mb, limits.fsize_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class LocalHandle(WorkerHandle):
    def __init__(self, proc: subprocess.Popen, workdir: str):
        self.proc = proc
        self.workdir = workdir

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait on anything
            pass

    def post_mortem(self) -> dict:
        info = super().post_mortem()
        code = info.get("exit_code")
        if code is not None and code > 128 and self.namespaced:
            info["signal"] = code - 128  # unshare --fork reports the child's signal as 128+n
        return info

    namespaced = False

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (OSError, AttributeError):
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)


class LocalSandbox(Sandbox):
    name = "local"

    def start(self, *, track: str, entry: str, submission: Path, limits: Limits) -> WorkerHandle:
        workdir = tempfile.mkdtemp(prefix="grade-")
        os.chmod(workdir, 0o700)
        worker_dir = os.path.join(workdir, ".worker")
        os.mkdir(worker_dir)
        for name in WORKER_FILES:
            shutil.copyfile(WORKER_DIR / name, os.path.join(worker_dir, name))
        target = os.path.join(workdir, "submission.py")
        shutil.copyfile(submission, target)
        prefix = namespace_prefix()
        cmd = [*prefix, sys.executable, "-I", "-B", os.path.join(worker_dir, "worker.py"),
               "--track", track, "--entry", entry, target]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=workdir, env=scrubbed_env(workdir), start_new_session=True,
                                preexec_fn=functools.partial(_limit_resources, limits), close_fds=True)
        handle = LocalHandle(proc, workdir)
        handle.namespaced = bool(prefix)
        return handle

    def describe(self) -> dict:
        return {"sandbox": self.name, "namespaces": bool(namespace_prefix())}
