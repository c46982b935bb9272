"""A cgroup of its own for each local worker: a process limit (``pids``) and a memory limit (``memory_mb``) that
bind root, which ``RLIMIT_NPROC`` does not. cgroup v2 where ``/sys/fs/cgroup`` is cgroup2, v1 otherwise.

Each worker's cgroup is a child of the grader's own cgroup in each hierarchy (so whatever limits the grader
itself stay in force above it), named ``attn-grader-<grader pid>-<n>``. The worker joins it before anything of
a candidate runs: a cold worker between fork and exec (:meth:`WorkerCgroup.join`, in the Popen preexec step);
a warm worker forked by the zygote as its very first step, through descriptors of ``cgroup.procs`` the host
opened and passed along (the zygote's /sys is read-only). When the worker ends, everything left in its cgroup
is killed (``cgroup.kill`` on v2; on v1 freeze, SIGKILL each member, thaw) and the cgroup removed; cgroups of
graders that are gone are swept (once per process).

Where no cgroup can be made (not root, no writable hierarchy, a v2 cgroup whose children cannot get the
controllers, ``GRADER_LOCAL_NO_CGROUP=1``) the local backend runs without these limits: :func:`support` says
why, the report's ``environment.cgroup`` records it and `grade sandbox doctor` shows it.
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import functools
import itertools
import os
import signal
import threading
import time

ROOT = "/sys/fs/cgroup"
PREFIX = "attn-grader-"
DISABLE_ENV = "GRADER_LOCAL_NO_CGROUP"
V1_CONTROLLERS = ("pids", "memory", "freezer")  # freezer (optional): stop a fork loop while it is killed
_counter = itertools.count(1)


@dataclasses.dataclass(frozen=True)
class Support:
    """What this process can do: ``version`` "v2"/"v1" or None; ``dirs``: controller -> the grader's own cgroup
    directory (v2: one directory under the key "unified"); ``pids``/``memory``: whether that limit can be set;
    ``reason``: why a limit is not available ('' when both are)."""

    version: str | None
    dirs: dict
    pids: bool
    memory: bool
    reason: str = ""

    def describe(self) -> dict:
        out = {"version": self.version, "pids_limit": self.pids, "memory_limit": self.memory}
        if self.reason:
            out["reason"] = self.reason
        return out


def _own_paths() -> dict:
    """controller -> path of this process's cgroup in that hierarchy ('' for the v2 hierarchy)."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f.read().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    return out


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the hierarchy, fstype, super options) of every cgroup mount."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f.read().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                out.append((fields[4].replace("\\040", " "), fields[3], tail[0], tail[2]))
    return out


def _join(mount: str, mount_root: str, own: str) -> str:
    rel = os.path.relpath(own, mount_root) if own.startswith(mount_root) else own.lstrip("/")
    return os.path.normpath(os.path.join(mount, "" if rel == "." else rel))


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


@functools.lru_cache(maxsize=1)
def support() -> Support:
    """Detected once per process, with a real probe: a cgroup is made, limited and removed."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return Support(None, {}, False, False, f"disabled by {DISABLE_ENV}")
    try:
        mounts, own = _mounts(), _own_paths()
    except (OSError, ValueError) as exc:
        return Support(None, {}, False, False, f"cannot read this process's cgroups: {exc}")
    v2 = [m for m in mounts if m[0] == ROOT and m[2] == "cgroup2"]
    if v2:  # not only root: a delegated subtree (systemd-run --user --scope -p Delegate=yes) works too
        return _probe_v2(_join(v2[0][0], v2[0][1], own.get("", "/")))
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return Support(None, {}, False, False, "the grader is not root (cgroup v1 here: a cgroup of its own "
                                               "needs root)")
    dirs = {}
    for controller in V1_CONTROLLERS:
        found = [m for m in mounts if m[2] == "cgroup" and controller in m[3].split(",")]
        if found and controller in own:
            dirs[controller] = _join(found[0][0], found[0][1], own[controller])
    if not dirs:
        return Support(None, {}, False, False, f"no cgroup v1 pids/memory hierarchy and no cgroup2 at {ROOT}")
    return _probe_v1(dirs)


def _probe_v2(parent: str) -> Support:
    dirs = {"unified": parent}
    try:
        available = set(_read(os.path.join(parent, "cgroup.controllers")).split())
        enabled = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
    except OSError as exc:
        return Support(None, {}, False, False, f"cgroup v2 at {parent} not readable: {exc.strerror}")
    missing = [c for c in ("pids", "memory") if c not in enabled]
    if missing and set(missing) <= available:
        try:
            _write(os.path.join(parent, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing))
        except OSError as exc:
            why = ("it holds processes itself (no-internal-processes rule): run the grader in a cgroup of its "
                   "own, e.g. `systemd-run --scope -p Delegate=yes grade ...`") if exc.errno == errno.EBUSY \
                else exc.strerror
            return Support(None, {}, False, False,
                           f"cgroup v2: cannot enable {'+'.join(missing)} for children of {parent}: {why}")
        enabled |= set(missing)
    pids, memory = "pids" in enabled, "memory" in enabled
    if not (pids or memory):
        return Support(None, {}, False, False, f"cgroup v2: neither pids nor memory is delegated to {parent}")
    return _probe(Support("v2", dirs, pids, memory))


def _probe_v1(dirs: dict) -> Support:
    pids, memory = "pids" in dirs, "memory" in dirs
    return _probe(Support("v1", dirs, pids, memory))


def _probe(sup: Support) -> Support:
    """Make a cgroup with both limits, remove it; what fails is not available, and says why."""
    reasons = []
    ok = {}
    for limit in ("pids", "memory"):
        if not getattr(sup, limit):
            reasons.append(f"no {limit} controller")
            ok[limit] = False
            continue
        base = sup.dirs.get("unified") or sup.dirs[limit]
        path = os.path.join(base, f"{PREFIX}{os.getpid()}-probe-{limit}")
        try:
            os.mkdir(path)
            try:
                if limit == "pids":
                    _write(os.path.join(path, "pids.max"), "8")
                else:
                    _write(os.path.join(path, "memory.max" if sup.version == "v2" else "memory.limit_in_bytes"),
                           str(64 << 20))
            finally:
                os.rmdir(path)
            ok[limit] = True
        except OSError as exc:
            if exc.errno == errno.EEXIST:  # a probe of ours that was interrupted: take it as working
                try:
                    os.rmdir(path)
                except OSError:
                    pass
                ok[limit] = True
                continue
            reasons.append(f"cannot make a {limit} cgroup under {base}: {exc.strerror}")
            ok[limit] = False
    if not (ok["pids"] or ok["memory"]):
        return Support(None, {}, False, False, f"cgroup {sup.version}: " + "; ".join(reasons))
    dirs = dict(sup.dirs)
    for limit in ("pids", "memory"):
        if not ok[limit]:
            dirs.pop(limit, None)
    return Support(sup.version, dirs, ok["pids"], ok["memory"], "; ".join(reasons))


class WorkerCgroup:
    """One worker's cgroup (a directory per v1 hierarchy, one for v2), limits set, nobody in it yet."""

    def __init__(self, sup: Support, *, pids: int, memory_mb: int):
        self.sup = sup
        self.name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.dirs: dict[str, str] = {}
        try:
            if sup.version == "v2":
                self.dirs["unified"] = self._make(sup.dirs["unified"])
                base = self.dirs["unified"]
                if sup.pids:
                    _write(os.path.join(base, "pids.max"), str(int(pids)))
                if sup.memory:
                    _write(os.path.join(base, "memory.max"), str(int(memory_mb) << 20))
                    _try_write(os.path.join(base, "memory.swap.max"), "0")
            else:
                for controller, parent in sup.dirs.items():
                    try:
                        self.dirs[controller] = self._make(parent)
                    except OSError:
                        if controller != "freezer":  # optional: without it the kill loops over the members
                            raise
                if "pids" in self.dirs:
                    _write(os.path.join(self.dirs["pids"], "pids.max"), str(int(pids)))
                if "memory" in self.dirs:
                    mem = self.dirs["memory"]
                    _write(os.path.join(mem, "memory.limit_in_bytes"), str(int(memory_mb) << 20))
                    _try_write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(int(memory_mb) << 20))
        except OSError:
            self.remove()
            raise

    def _make(self, parent: str) -> str:
        path = os.path.join(parent, self.name)
        os.mkdir(path)
        return path

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs.values()]

    def join(self) -> None:
        """Move the calling process into this cgroup (every hierarchy). Safe between fork and exec."""
        for path in self.procs_files:
            _write(path, "0")

    def open_procs(self) -> list[int]:
        """Descriptors of the ``cgroup.procs`` files, for a process that cannot open them itself (a zygote's
        child: it writes "0" to each to join). The caller closes them."""
        fds = []
        try:
            for path in self.procs_files:
                fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def members(self) -> list[int]:
        """Pids of the processes in the cgroup now (from the pids hierarchy on v1, or any)."""
        base = self.dirs.get("unified") or self.dirs.get("pids") or next(iter(self.dirs.values()), None)
        if base is None:
            return []
        try:
            return [int(p) for p in _read(os.path.join(base, "cgroup.procs")).split()]
        except (OSError, ValueError):
            return []

    def evidence(self) -> dict:
        """What the cgroup saw: an OOM kill, fork refusals at the pids limit, the memory high-water mark."""
        info: dict = {}
        if self.sup.version == "v2":
            base = self.dirs.get("unified")
            events = _keyed(os.path.join(base, "memory.events")) if base and self.sup.memory else {}
            if events:
                info["cgroup_oom_kills"] = events.get("oom_kill", 0)
            pev = _keyed(os.path.join(base, "pids.events")) if base and self.sup.pids else {}
            if pev:
                info["cgroup_pids_refused"] = pev.get("max", 0)
            peak = _number(os.path.join(base, "memory.peak")) if base else None
        else:
            mem = self.dirs.get("memory")
            oom = _keyed(os.path.join(mem, "memory.oom_control")) if mem else {}
            if "oom_kill" in oom:
                info["cgroup_oom_kills"] = oom["oom_kill"]
            elif mem:  # kernels before 4.13: the limit was hit (reclaim may have coped) and the worker died
                info["cgroup_memory_failcnt"] = _number(os.path.join(mem, "memory.failcnt")) or 0
            pev = _keyed(os.path.join(self.dirs["pids"], "pids.events")) if "pids" in self.dirs else {}
            if pev:
                info["cgroup_pids_refused"] = pev.get("max", 0)
            peak = _number(os.path.join(mem, "memory.max_usage_in_bytes")) if mem else None
        if peak is not None:
            info["cgroup_memory_peak_mb"] = round(peak / (1 << 20), 1)
        if info.get("cgroup_oom_kills") or info.get("cgroup_memory_failcnt"):
            info["oom_killed"] = True
        return info

    def kill(self, timeout: float = 5.0, *, wait: bool = True) -> bool:
        """SIGKILL everything in the cgroup; whether it is empty by ``timeout``. ``wait=False``: one pass (the
        members are frozen, killed, thawed: none can fork past it), without waiting for them to exit."""
        if not self.dirs:
            return True
        base = self.dirs.get("unified")
        if base and _try_write(os.path.join(base, "cgroup.kill"), "1"):
            return self._wait_empty(timeout) if wait else False
        freezer = self.dirs.get("freezer")
        deadline = time.monotonic() + timeout
        while True:
            frozen = bool(freezer) and _try_write(os.path.join(freezer, "freezer.state"), "FROZEN")
            members = self.members()
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if frozen:
                _try_write(os.path.join(freezer, "freezer.state"), "THAWED")  # the kills land on thawing
            if not wait:
                return not members
            if not members or self._wait_empty(0.05) or time.monotonic() >= deadline:
                return not self.members()

    def _wait_empty(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.members():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def remove(self) -> bool:
        """Kill whatever is left and remove the cgroup; whether it is gone (a leftover is swept later)."""
        self.kill()
        gone = True
        for controller, path in list(self.dirs.items()):
            if _rmdir(path):
                del self.dirs[controller]
            else:
                gone = False
        return gone


_remover: concurrent.futures.ThreadPoolExecutor | None = None  # started by the first retire()
_pending: set = set()
_pending_lock = threading.Lock()


def retire(group: WorkerCgroup) -> None:
    """Kill everything in ``group`` now; wait for it to exit and remove the cgroup in the background (the report
    does not wait for the members' exit; :func:`drain` does, and runs at exit)."""
    import concurrent.futures  # here, not at the top: a one-shot grade starts its worker before it needs this

    global _remover
    group.kill(wait=False)
    with _pending_lock:
        try:
            if _remover is None:
                _remover = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cgroup-remove")
                atexit.register(drain)
            future = _remover.submit(group.remove)
        except RuntimeError:  # the interpreter is shutting down: remove it here
            future = None
        else:
            _pending.add(future)
    if future is None:
        group.remove()
        return
    future.add_done_callback(_done)


def _forget_remover() -> None:  # a forked child has no remover thread: it starts its own if it needs one
    global _remover, _pending, _pending_lock
    _remover, _pending, _pending_lock = None, set(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_remover)


def _done(future) -> None:
    with _pending_lock:
        _pending.discard(future)


def drain(timeout: float = 10.0) -> bool:
    """Wait until every retired cgroup is removed (or given up: the sweep takes it later); whether all are done."""
    import concurrent.futures

    with _pending_lock:
        pending = list(_pending)
    done, not_done = concurrent.futures.wait(pending, timeout)
    return not not_done


def _try_write(path: str, value: str) -> bool:
    try:
        _write(path, value)
        return True
    except OSError:
        return False


def _rmdir(path: str, timeout: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:  # EBUSY: a member is still exiting
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _keyed(path: str) -> dict:
    try:
        pairs = (line.split() for line in _read(path).splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].lstrip("-").isdigit()}
    except OSError:
        return {}


def _number(path: str) -> int | None:
    try:
        return int(_read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def create(limits) -> WorkerCgroup | None:
    """A fresh cgroup for one worker with ``limits`` (pids, memory_mb), or None where cgroups are unavailable.
    OSError when they are available but this one cannot be made (the caller's start fails: a grader fault)."""
    sup = support()
    if sup.version is None:
        return None
    sweep()
    return WorkerCgroup(sup, pids=limits.pids, memory_mb=limits.memory_mb)


def _grader_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


@functools.lru_cache(maxsize=1)
def sweep() -> list[str]:
    """Once per process: kill and remove the worker cgroups (attn-grader-<pid>-*) of graders that are gone."""
    return sweep_now()


def sweep_now() -> list[str]:
    sup = support()
    removed = []
    stale: dict[str, dict] = {}
    for controller, parent in sup.dirs.items():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if not name.startswith(PREFIX):
                continue
            pid = name[len(PREFIX):].split("-")[0]
            if not pid.isdigit() or int(pid) == os.getpid() or _grader_alive(int(pid)):
                continue
            stale.setdefault(name, {})[controller] = os.path.join(parent, name)
    for name, dirs in stale.items():
        group = WorkerCgroup.__new__(WorkerCgroup)
        group.sup, group.name, group.dirs = sup, name, dict(dirs)
        if group.remove():
            removed.append(name)
    return removed


def leftovers(pid: int | None = None) -> list[str]:
    """Names of the worker cgroups of grader ``pid`` (default: this process) that still exist (tests prove
    nothing is left behind)."""
    drain()
    found = set()
    mine = f"{PREFIX}{pid or os.getpid()}-"
    for parent in support().dirs.values():
        try:
            found.update(n for n in os.listdir(parent) if n.startswith(mine) and "-probe-" not in n)
        except OSError:
            continue
    return sorted(found)


def doctor_checks() -> list[tuple[str, bool, str, str]]:
    """(name, ok, detail, hint) for `grade sandbox doctor`: the local backend's process and memory limits."""
    sup = support()
    out = []
    for limit, what in (("pids", "process-count limit (pids)"), ("memory", "memory limit (memory_mb)")):
        on = getattr(sup, limit)
        if on:
            where = sup.dirs.get("unified") or sup.dirs.get(limit)
            detail = f"{what} in force: cgroup {sup.version}, a cgroup per worker under {where}"
            hint = ""
        else:
            rl = "RLIMIT_AS only (per process)" if limit == "memory" else "none (RLIMIT_NPROC does not bind root)"
            detail = f"{what} NOT in force ({sup.reason or 'unavailable'}); fallback: {rl}"
            hint = (f"unset {DISABLE_ENV}" if sup.reason.startswith("disabled") else
                    "run the grader as root on a machine with cgroup v1 pids/memory controllers or cgroup v2 "
                    "(a delegated subtree with pids and memory), or grade with --sandbox docker")
        out.append((f"local {limit} limit", on, detail, hint))
    return out
