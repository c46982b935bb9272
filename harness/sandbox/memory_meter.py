"""The worker's memory as the host measures it: the memory counters of the worker's own cgroup, read and reset by
the host around one call, where the candidate's code cannot reach them.

Which cgroup: a local worker's own (harness/sandbox/cgroup.py; cold workers and a zygote's children alike), a
docker container's (runc: the container's processes; runsc: gVisor's whole sandbox, its Sentry and the memory
file that backs the guest's memory), found from the host through ``docker inspect`` and ``/proc/<pid>/cgroup``.

Which counter:

* cgroup v1: ``memory.max_usage_in_bytes`` (the high-water mark of ``memory.usage_in_bytes``; writing 0 resets
  it to the current usage), so a peak, however short, is never missed;
* cgroup v2: ``memory.peak``, reset through the host's own descriptor where the kernel allows it (Linux 6.12+:
  a write resets the peak seen through that descriptor); otherwise ``memory.current`` sampled by a host thread
  every :data:`SAMPLE_S` for the length of the call (a peak shorter than that can be missed: the figure is a
  lower bound, and says so in ``method``).

A figure is what the cgroup charged: anonymous memory, shared memory and tmpfs files the worker touched, and
page cache it read in (not pages already cached by someone else). The figure the suite holds against its bound
is ``peak_bytes`` = the call's peak minus the usage just before it (:meth:`Meter.begin`): what the call added.
``held_bytes`` (usage before the call minus the usage when the worker's boot frame arrived: the candidate's import
and whatever earlier calls kept) is reported beside it, so memory taken ahead of the call and reused in it shows.
"""

from __future__ import annotations

import os
import threading
import time

SAMPLE_S = 0.001   # v2 without a resettable memory.peak: memory.current sampled this often during the call


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _write(path: str, value: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, value.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


class Meter:
    """One cgroup's memory counters. ``begin()`` before the request is written, ``end()`` once its answer is
    read; ``current()`` any time (the usage now, or None when the cgroup is gone)."""

    def __init__(self, directory: str, version: str, where: str):
        self.directory, self.version, self.where = directory, version, where
        self._baseline = 0
        self._peak_fd: int | None = None
        self._sampler: threading.Thread | None = None
        self._sampled = 0
        self._stop = threading.Event()
        self.method = ""

    def _file(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def current(self) -> int | None:
        return _read_int(self._file("memory.usage_in_bytes" if self.version == "v1" else "memory.current"))

    def usable(self) -> bool:
        return self.current() is not None

    def begin(self) -> bool:
        """Reset the peak to the usage now and remember that usage; False when the counters cannot be used."""
        self.end_sampling()
        if self.version == "v1":
            if not _write(self._file("memory.max_usage_in_bytes"), "0"):
                return False
            base = self.current()
            if base is None:
                return False
            self._baseline = base
            self.method = "cgroup v1 memory.max_usage_in_bytes (reset before the call)"
            return True
        base = self.current()
        if base is None:
            return False
        self._baseline = base
        try:  # Linux 6.12+: a write resets the peak seen through this descriptor
            fd = os.open(self._file("memory.peak"), os.O_RDWR)
            try:
                os.write(fd, b"reset\n")
            except OSError:
                os.close(fd)
                raise
            self._peak_fd = fd
            self.method = "cgroup v2 memory.peak (reset through the host's descriptor)"
            return True
        except OSError:
            pass
        self._sampled = base
        self._stop.clear()
        self._sampler = threading.Thread(target=self._sample, daemon=True, name="memory-meter")
        self._sampler.start()
        self.method = f"cgroup v2 memory.current sampled every {SAMPLE_S * 1000:g} ms (a shorter peak can be missed)"
        return True

    def _sample(self) -> None:
        path = self._file("memory.current")
        while not self._stop.is_set():
            value = _read_int(path)
            if value is None:
                return
            self._sampled = max(self._sampled, value)
            time.sleep(SAMPLE_S)

    def end_sampling(self) -> None:
        if self._sampler is not None:
            self._stop.set()
            self._sampler.join(timeout=1.0)
            self._sampler = None
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None

    def end(self) -> dict | None:
        """The call's figures (bytes): ``peak_bytes`` (peak minus the usage before the call), ``baseline_bytes``,
        ``peak_total_bytes``, ``method``, ``cgroup``; None when the counters could not be read."""
        peak: int | None
        if self.version == "v1":
            peak = _read_int(self._file("memory.max_usage_in_bytes"))
        elif self._peak_fd is not None:
            try:
                peak = int(os.pread(self._peak_fd, 64, 0).split()[0])
            except (OSError, ValueError, IndexError):
                peak = None
        else:
            now = self.current()
            peak = None if now is None else max(self._sampled, now)
        self.end_sampling()
        if peak is None:
            return None
        return {"peak_bytes": max(0, peak - self._baseline), "baseline_bytes": self._baseline,
                "peak_total_bytes": peak, "method": self.method, "cgroup": self.where}


def for_directory(directory: str | None, version: str | None) -> Meter | None:
    if not directory or version not in ("v1", "v2"):
        return None
    meter = Meter(directory, version, directory)
    return meter if meter.usable() else None


# -- docker: the container's cgroup, found from the host ---------------------------------------------------------
def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the hierarchy, fstype, super options) of the host's cgroup mounts."""
    from harness.sandbox.cgroup import _mounts as mounts

    return mounts()


def container_cgroup(container_id: str, pid: int | None) -> tuple[Meter | None, str]:
    """The memory cgroup of a running container, from the host: the cgroup of its main process as
    ``/proc/<pid>/cgroup`` names it (v1 memory hierarchy, else v2), joined to where this host mounts that
    hierarchy; the directory must name the container's id (a pid from another PID namespace could name another
    process). Returns (meter, '') or (None, why not)."""
    if not container_id:
        return None, "the engine did not name the container's id"
    try:
        mounts = _mounts()
    except OSError as exc:
        return None, f"cannot read the host's cgroup mounts: {exc}"
    v1 = [m for m in mounts if m[2] == "cgroup" and "memory" in m[3].split(",")]
    v2 = [m for m in mounts if m[2] == "cgroup2"]
    paths: dict[str, str] = {}
    if pid:
        try:
            with open(f"/proc/{int(pid)}/cgroup") as f:
                for line in f.read().splitlines():
                    _, controllers, path = line.split(":", 2)
                    if "memory" in controllers.split(","):
                        paths["v1"] = path
                    elif controllers == "":
                        paths["v2"] = path
        except (OSError, ValueError):
            pass
    guesses = [f"/docker/{container_id}", f"/system.slice/docker-{container_id}.scope"]
    for version, found in (("v1", v1), ("v2", v2)):
        if not found:
            continue
        mount, root = found[0][0], found[0][1]
        for rel in ([paths[version]] if version in paths else []) + guesses:
            if container_id not in rel:
                continue
            inner = os.path.relpath(rel, root) if rel.startswith(root) and root != "/" else rel.lstrip("/")
            directory = os.path.normpath(os.path.join(mount, inner))
            name = "memory.usage_in_bytes" if version == "v1" else "memory.current"
            if os.path.exists(os.path.join(directory, name)):
                return Meter(directory, version, directory), ""
    return None, (f"no memory cgroup of container {container_id[:12]} is visible on this host "
                  f"(looked under {', '.join(m[0] for m in v1 + v2) or 'no cgroup mount'})")
