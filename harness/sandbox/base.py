"""The sandbox backend interface: start a worker process with pipes, kill it, explain its death."""

from __future__ import annotations

import dataclasses
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import NamedTuple

# The Docker sandbox's OCI runtimes (harness/sandbox/docker.py); here so that the CLI's --runtime option does not
# import the Docker backend for a local grade.
RUNTIME_ENV = "GRADER_DOCKER_RUNTIME"
RUNTIMES = ("runc", "runsc")  # Docker's default (namespaces on the host kernel) | gVisor (a user-space kernel)
DEFAULT_RUNTIME = "runc"

WORKER_DIR = Path(__file__).resolve().parent.parent / "worker"  # holds worker.py and wire.py
WORKER_FILES = ("worker.py", "wire.py")
# glibc's malloc in a worker: fixed thresholds (a free never moves them) that keep what a call frees for reuse: only
# allocations of 32 MiB and more are mmapped, and up to 128 MiB free at the top of the heap is kept. A large array's
# pages are faulted in once per call, not once per array (issue 27: with every allocation of 128 KiB and more
# mmapped, as before, mha's large cases took 2-4x the reference's own time and flash_attention's s = 4096 memory
# case 4x, all of it in page faults). A worker whose memory the host meters (Limits.metered_memory:
# flash_attention's memory test) must hold between calls only what it holds, since the host reads its usage before
# a call as what it held (harness/sandbox/memory_meter.py): on the NumPy track it hands what malloc holds free back
# to the system before every answer (worker.py TRIM_ENV), and within a call reuses what the call frees (the correct
# variants' peaks moved by at most 3 MiB); on the torch track, whose allocator's many sizes fragment a reused heap
# (a correct variant's peak went from 12-15 to 30-36 MiB), every allocation of 128 KiB and more stays mmapped and
# returned on free (METERED_MALLOC), as for every worker before.
REUSING_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}
METERED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(128 << 10), "MALLOC_TRIM_THRESHOLD_": str(128 << 10)}
TRIM_ENV = "GRADER_WORKER_TRIM"   # worker.py's name for it


def malloc_env(metered: bool, track: str) -> dict:
    """A worker's malloc settings as environment variables (see REUSING_MALLOC)."""
    if not metered:
        return dict(REUSING_MALLOC)
    return dict(METERED_MALLOC) if track == "torch" else {**REUSING_MALLOC, TRIM_ENV: "1"}


class DoctorCheck(NamedTuple):
    """One line of `grade sandbox doctor`: what was checked, whether it is fine, what was seen, how to fix it."""

    name: str
    ok: bool
    detail: str
    hint: str = ""


@dataclasses.dataclass
class Limits:
    """Resource limits for one submission's worker. Exercise metadata and the CLI may override any field."""

    call_timeout_s: float = 20.0       # wall clock per request, enforced by the host
    total_timeout_s: float = 300.0     # wall clock for all of one submission's requests together
    startup_timeout_s: float = 60.0    # wall clock for interpreter + imports + the candidate's module body
    memory_mb: int = 2048              # address space + memory cgroup (local) / --memory (docker)
    cpu_s: int = 300                   # CPU seconds for the worker's lifetime (local RLIMIT_CPU)
    cpus: float = 1.0                  # docker --cpus
    pids: int = 64                     # docker --pids-limit / the local worker's cgroup pids.max
    nofile: int = 256                  # open files
    fsize_mb: int = 16                 # largest file the worker may write
    tmpfs_mb: int = 64                 # docker scratch tmpfs
    output_bytes: int = 256 * 1024     # stdout+stderr cap; beyond it the call is output_limit
    max_restarts: int = 3              # worker restarts after a fatal call before remaining tests error
    # the host measures the worker's memory around calls (flash_attention's exercise sets it): between calls the
    # worker holds only what it holds, not what malloc keeps (REUSING_MALLOC)
    metered_memory: bool = False

    def replace(self, **changes) -> "Limits":
        known = {f.name for f in dataclasses.fields(self)}
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if k in known and v is not None})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class WorkerHandle(ABC):
    """A running worker: ``proc`` has stdin/stdout/stderr pipes (binary)."""

    proc: subprocess.Popen
    exchange = None  # harness.sandbox.exchange.Exchange: argument memory the host reads back (None: not offered)
    idle_memory = None  # a warm worker's cgroup usage while idle, read by its pool before the submission was sent

    def close_exchange(self) -> None:
        if self.exchange is not None:
            self.exchange.close()

    def memory_meter(self):
        """The host's meter of this worker's memory (:class:`harness.sandbox.memory_meter.Meter`: the worker's own
        cgroup counters), or None when the host cannot measure it; :meth:`memory_meter_reason` then says why."""
        return None

    def memory_meter_reason(self) -> str:
        return "this sandbox offers no memory counters the host can read"

    @abstractmethod
    def kill(self) -> None:
        """Stop the worker and everything it started, now."""

    def post_mortem(self) -> dict:
        """Evidence about how the worker ended: exit code, signal, OOM flag. Call after kill()/exit."""
        code = self.proc.poll()
        info: dict = {"exit_code": code}
        if code is not None and code < 0:
            info["signal"] = -code
        return info

    def cleanup(self) -> None:
        """Remove whatever the worker left behind (temp dirs, containers). Idempotent."""


class Sandbox(ABC):
    name: str = "abstract"

    @abstractmethod
    def start(self, *, track: str, entry: str, submission: Path, limits: Limits) -> WorkerHandle:
        """Start a worker for ``submission`` that will serve ``entry`` in ``track`` (numpy|torch|python)."""

    def describe(self) -> dict:
        return {"sandbox": self.name}
