"""Warm workers: single-use sandbox workers started ahead of time, so a submission does not wait for a fresh
interpreter and ``import torch``.

    from harness.session.warm import WarmPool
    pool = WarmPool("local")                    # or "docker", or "auto"; size: idle workers kept per kind
    pool.prewarm("torch")                       # optional: start the zygote / containers now
    report = harness.grade(exercise="mha", submission=path, sandbox=pool)   # a WarmPool is a Sandbox
    pool.close()                                # also done at exit

    harness.grade(..., warm=True)               # the same through one pool per process (shared_pool)

* **local**: one zygote per track (:class:`harness.sandbox.local.Zygote`) forks a worker per submission, which
  enters fresh namespaces, its own tmpfs, rlimits, drops its privileges and reseeds every generator before it
  says ``idle``. Without the mount-namespace isolation the pool is cold (plain :class:`LocalSandbox` starts).
* **docker**: containers started ahead of time from the sandbox image (``worker.py --warm``), each used for one
  submission then removed; the pool refills in the background.

A warm worker says ``idle`` when it is set up and warmed up (the pool reads it; a worker that dies or hangs
before it is replaced, and after BOOT_ATTEMPTS failures the submission is an InfrastructureError). When the pool
hands it out it sends a ``load`` request (the entry point and the file's bytes); the worker writes the file to
its own tmpfs and answers ``boot``: from there on it is a cold worker's journey (``ready``/``error``, requests).
So ``boot`` keeps its meaning: nothing of the candidate's has run, and a death before it is the grader's fault,
retried by :class:`~harness.session.channel.WorkerSession` with another warm worker, then an infrastructure error.

Settings: ``GRADER_WARM_POOL_SIZE`` (default 1): idle workers kept ready per (track, limits).
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import json
import os
import select
import threading
import time
from pathlib import Path

import numpy as np

from harness.core.errors import InfrastructureError
from harness.sandbox.base import Limits, Sandbox, WorkerHandle
from harness.worker import wire

POOL_SIZE_ENV = "GRADER_WARM_POOL_SIZE"
WARM_UP_ENV = "ATTN_GRADER_WARM_UP"  # "0": warm containers only import (grade batch: throughput over latency)
ATTEMPTS = 3  # warm workers tried (and zygotes replaced) before the pool gives up: an infrastructure error


def pool_size() -> int:
    try:
        return max(0, int(os.environ.get(POOL_SIZE_ENV, "1")))
    except ValueError:
        return 1


def _key(track: str, limits: Limits) -> tuple:
    return track, json.dumps(limits.to_dict(), sort_keys=True)


class WarmPool(Sandbox):
    """A :class:`Sandbox` whose ``start`` hands out a warm, single-use worker. Thread-safe."""

    def __init__(self, backend: str | Sandbox = "auto", *, size: int | None = None, notice=None,
                 warm_up: bool | None = None):
        """``warm_up`` (docker): each container also runs a small forward/backward before it says idle (lower
        latency, more CPU per container); default: on unless ``ATTN_GRADER_WARM_UP=0`` (`grade batch` sets it
        for its grading processes: it grades for throughput). A zygote always warms up (once, for all its forks)."""
        if isinstance(backend, str):
            from harness.sandbox import get_sandbox

            backend = get_sandbox(backend, notice=notice)
        self.backend = backend
        self.name = backend.name
        self.size = pool_size() if size is None else max(0, int(size))
        self.warm_up = (os.environ.get(WARM_UP_ENV, "1") != "0") if warm_up is None else bool(warm_up)
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        # Every process the pool starts (zygotes, `docker run` clients) is started from this one long-lived
        # thread: PR_SET_PDEATHSIG, which ties them to the grader, fires when the *thread* that forked them ends.
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="warm-spawn")
        self._spawner.submit(int)  # its thread starts now: a later submit() never blocks (or is interrupted) on that
        self._idle: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self._filling: collections.Counter = collections.Counter()
        self._zygotes: dict[str, object] = {}
        self._outdated: list = []  # zygotes replaced because what they hide is stale: closed once none is busy
        self._starting: set = set()  # warm workers started, not yet idle: close() stops them too
        self._retiring: set = set()  # used containers being killed and removed in the background
        self._remover = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="warm-retire")
        self._closed = False
        self.cold = self.name == "local" and not _local_can_fork()
        self.stats = collections.Counter()  # handed_out, spawned, replaced, zygotes
        atexit.register(self.close)

    # -- the Sandbox interface ------------------------------------------------------------------------------
    def start(self, *, track: str, entry: str, submission: Path, limits: Limits) -> WorkerHandle:
        if self.cold:
            return self.backend.start(track=track, entry=entry, submission=submission, limits=limits)
        source = Path(submission).read_bytes()
        handle = self._take(track, limits)
        self.stats["handed_out"] += 1
        if self.name == "docker":
            handle.retire = lambda: self._retire(handle)
        self._refill(track, limits)
        meter = handle.memory_meter()  # idle, before anything of the candidate's exists: the race-free baseline
        handle.idle_memory = meter.current() if meter is not None else None
        try:
            _write(handle, wire.encode_frame({"op": "load", "entry": entry},
                                             {wire.SOURCE: np.frombuffer(source, dtype=np.uint8)}))
        except OSError:
            pass  # it died meanwhile: the session sees a death before boot, a grader fault, and starts another
        return handle

    def describe(self) -> dict:
        return {**self.backend.describe(), "warm": not self.cold}

    # -- used containers ------------------------------------------------------------------------------------
    def _retire(self, handle: WorkerHandle) -> None:
        """Kill and remove a used container on the pool's remover thread (WorkerSession.close)."""
        handle.retire = None
        with self._lock:
            self._retiring.add(handle)

        def stop() -> None:
            try:
                _discard(handle)  # kill (the engine), inspect, remove
            finally:
                with self._ready:
                    self._retiring.discard(handle)
                    self._ready.notify_all()

        try:
            self._remover.submit(stop)
        except RuntimeError:  # the pool is closing: do it here
            stop()

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until every used container is killed and removed; whether they all are."""
        deadline = time.monotonic() + timeout
        with self._ready:
            return self._ready.wait_for(lambda: not self._retiring, max(0.0, deadline - time.monotonic()))

    # -- the pool -------------------------------------------------------------------------------------------
    def prewarm(self, track: str, limits: Limits | None = None, *, wait: bool = False) -> None:
        """Start filling the pool for ``track`` now (a service calls this at start-up); ``wait``: return only
        once a worker is idle (or raise InfrastructureError)."""
        if self.cold:
            return
        limits = limits or Limits()
        if not wait:
            self._refill(track, limits)
            return
        handle = self._spawn_idle(track, limits)
        with self._ready:
            if not self._closed:
                self._idle[_key(track, limits)].append((handle, time.monotonic()))
                self._ready.notify_all()
                handle = None
        if handle is not None:
            _discard(handle)

    def wait_idle(self, track: str, limits: Limits | None = None, *, timeout: float = 60.0) -> bool:
        """Wait until a worker for ``track`` (and ``limits``) is idle in the pool, starting one if none is on its
        way; whether one is. (Benchmarks measure the idle path with it; a service need not call it.)"""
        if self.cold:
            return False
        limits = limits or Limits()
        key = _key(track, limits)
        self._refill(track, limits)
        deadline = time.monotonic() + timeout
        with self._ready:
            while not self._idle[key]:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._ready.wait(left)
            return True

    def _take(self, track: str, limits: Limits) -> WorkerHandle:
        key = _key(track, limits)
        deadline = time.monotonic() + limits.startup_timeout_s
        with self._ready:
            while True:
                queue = self._idle[key]
                while queue:
                    handle, born = queue.popleft()
                    if (handle.proc.poll() is None and time.monotonic() - born < self._max_idle_s()
                            and not _forked_by_stale_zygote(handle)):
                        return handle
                    self.stats["replaced"] += 1
                    _discard(handle)
                if not self._filling[key] or time.monotonic() >= deadline:
                    break
                self._ready.wait(deadline - time.monotonic())  # one is on its way: wait for it
        failures = []
        for _ in range(ATTEMPTS):  # none ready: make one now
            try:
                return self._spawn_idle(track, limits)
            except InfrastructureError as exc:
                failures.append(exc.message)
                self.stats["replaced"] += 1
        raise InfrastructureError(f"the warm {self.name} pool could not provide a worker ({ATTEMPTS} attempts): "
                                  f"{failures[-1]}", attempts=failures)

    def _refill(self, track: str, limits: Limits) -> None:
        key = _key(track, limits)
        with self._lock:
            if self._closed or len(self._idle[key]) + self._filling[key] >= self.size:
                return
            self._filling[key] += 1
        threading.Thread(target=self._fill_one, args=(key, track, limits), daemon=True,
                         name=f"warm-fill-{track}").start()

    def _fill_one(self, key: tuple, track: str, limits: Limits) -> None:
        try:
            handle = self._spawn_idle(track, limits)
        except Exception:  # the next take() makes one itself, and reports what goes wrong
            handle = None
        with self._ready:
            if handle is not None and not self._closed:
                self._idle[key].append((handle, time.monotonic()))
                handle = None
                self._filling[key] -= 1
                self._ready.notify_all()
                return
        if handle is not None:  # the pool closed meanwhile
            _discard(handle)
        with self._ready:  # only now: close() waits for this
            self._filling[key] -= 1
            self._ready.notify_all()

    def _spawn_idle(self, track: str, limits: Limits) -> WorkerHandle:
        """A new warm worker, once it has said ``idle``; InfrastructureError when it does not."""
        future = None
        try:
            future = self._spawner.submit(self._start_one, track, limits)
            handle, closed = future.result()
        except (RuntimeError, concurrent.futures.CancelledError) as exc:  # the pool was closed meanwhile
            raise InfrastructureError(f"the warm pool is closed: {exc}") from None
        except BaseException:  # interrupted while it starts (SIGTERM in a grading process): stopped once started,
            if future is not None:  # or close() would wait for it to leave _starting
                future.add_done_callback(self._abandon)
            raise
        self.stats["spawned"] += 1
        try:  # also when the pool is closing: a container is removed only once the engine has fully started it
            head = _read_frame(handle, time.monotonic() + limits.startup_timeout_s)
            if head.get("kind") != wire.IDLE:
                raise InfrastructureError(f"a warm worker sent {str(head.get('kind'))[:40]!r} instead of idle")
        except (InfrastructureError, OSError, ValueError) as exc:  # OSError/ValueError: close() got it first
            tail = _stderr_now(handle)
            _discard(handle)
            message = getattr(exc, "message", None) or f"a warm worker failed: {exc}"
            raise InfrastructureError(message + (f"; worker stderr: {tail}" if tail else "")) from None
        except BaseException:  # interrupted while it boots: nobody else will ever stop it
            _discard(handle)
            raise
        finally:
            with self._ready:
                self._starting.discard(handle)
                self._ready.notify_all()
        if closed and self.name == "local":
            _discard(handle)
            raise InfrastructureError("the warm pool is closed")
        return handle

    def _abandon(self, future: concurrent.futures.Future) -> None:
        """A worker whose starter was interrupted: once it is up, out of ``_starting`` and stopped."""
        if future.cancelled() or future.exception() is not None:
            return
        handle, _ = future.result()
        with self._ready:
            self._starting.discard(handle)
            self._ready.notify_all()
        _discard(handle)

    def _start_one(self, track: str, limits: Limits) -> tuple[WorkerHandle, bool]:
        """On the spawner thread: start a warm worker and register it, so that close() always finds it."""
        if self.name == "local":
            handle = self._zygote(track).spawn(limits)
        else:
            handle = self.backend.start_warm(track=track, limits=limits, warm_up=self.warm_up)
        with self._lock:
            self._starting.add(handle)
            return handle, self._closed

    def _zygote(self, track: str):
        from harness.sandbox.local import Zygote

        with self._lock:
            zygote = self._zygotes.get(track)
            outdated = zygote is not None and zygote.alive() and zygote.stale()
            if zygote is not None and zygote.alive() and not outdated:
                return zygote
            self._zygotes.pop(track, None)
            if outdated:  # a folder appeared that its forks would see: a new zygote hides it too
                self._outdated.append(zygote)
            done = [z for z in self._outdated if not z.busy()]  # the old one goes once its workers are done
            self._outdated = [z for z in self._outdated if z not in done]
        for gone in done:
            gone.close()
        if zygote is not None and not outdated:  # dead or misbehaving: replaced
            zygote.close()
        if zygote is not None:
            self.stats["replaced"] += 1
        fd = _inherited_connections().pop(track, None) if zygote is None else None
        if fd is not None:  # the batch's zygote for this track, shared with the batch's other grading processes
            zygote = Zygote(track, connection=fd)
            self.stats["attached"] += 1
        else:
            zygote = Zygote(track)
            self.stats["zygotes"] += 1
        with self._lock:
            if self._closed:
                zygote.close()
                raise InfrastructureError("the warm pool is closed")
            old = self._zygotes.get(track)
            self._zygotes[track] = zygote
        if old is not None:
            old.close()
        return zygote

    def _max_idle_s(self) -> float:
        if self.name == "docker":  # retired well before another grader's sweep would take it for a leftover
            from harness.sandbox.docker import max_run_s

            return max_run_s() / 2
        return float("inf")

    def owned(self) -> dict:
        """What the pool keeps running between submissions: the host's child processes (zygotes, the `docker
        run` clients of idle containers) and the names of idle containers (none of them has seen a candidate),
        and the used containers it is still removing (see :meth:`drain`)."""
        with self._lock:
            handles = [h for q in self._idle.values() for h, _ in q] + list(self._starting) + list(self._retiring)
            pids = [z.proc.pid for z in [*self._zygotes.values(), *self._outdated] if z.proc is not None]
        pids += [h.proc.pid for h in handles if getattr(h.proc, "pid", None)]
        return {"pids": pids, "containers": [n for n in (getattr(h, "name", None) for h in handles) if n]}

    def close(self) -> None:
        """Stop every idle worker and zygote. Workers already handed out belong to their sessions."""
        with self._lock:
            self._closed = True
        self._spawner.shutdown(wait=True, cancel_futures=True)  # whatever it was starting is registered now
        with self._ready:  # workers still starting: their fill threads remove them once they are up
            self._ready.wait_for(lambda: not self._starting and not any(self._filling.values()), 60.0)
            idle = [h for q in self._idle.values() for h, _ in q] + list(self._starting)
            self._idle.clear()
            self._starting.clear()
            zygotes = list(self._zygotes.values()) + self._outdated
            self._zygotes.clear()
            self._outdated = []
        for handle in idle:
            _discard(handle)
        self._remover.shutdown(wait=True)                       # used containers: killed and removed
        for zygote in zygotes:
            zygote.close()

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


ZYGOTE_FDS_ENV = "ATTN_GRADER_ZYGOTE_FDS"  # {"track": fd}: control connections to a batch's shared zygotes
_inherited: dict | None = None


def _inherited_connections() -> dict:
    """Control connections to zygotes a parent process (a batch) owns, passed down once; each is used by the
    first pool of this process that needs that track (if it dies, that pool starts a zygote of its own)."""
    global _inherited
    if _inherited is None:
        try:
            found = json.loads(os.environ.get(ZYGOTE_FDS_ENV) or "{}")
            _inherited = {str(k): int(v) for k, v in found.items()}
        except (ValueError, TypeError, AttributeError):
            _inherited = {}
    return _inherited


class SharedZygotes:
    """For a parent of several grading processes (``grade batch --jobs N``): one zygote per track that all of
    them fork their warm workers from, instead of one per process. Each child gets its own control connection
    (:meth:`child_env`: environment and descriptors for its ``Popen``); workers spawned through a connection die
    when it closes; :meth:`close` stops the zygotes."""

    def __init__(self, tracks):
        from harness.sandbox.local import Zygote

        self.zygotes = {}
        for track in sorted(tracks):
            try:
                self.zygotes[track] = Zygote(track, wait=False)  # the children do not wait for it either
            except InfrastructureError:
                continue  # the children start their own

    def child_env(self) -> tuple[dict, list[int]]:
        fds = {}
        for track, zygote in self.zygotes.items():
            if zygote.alive():
                try:
                    fds[track] = zygote.connect()
                except OSError:
                    continue
        return {ZYGOTE_FDS_ENV: json.dumps(fds)}, list(fds.values())

    def close(self) -> None:
        for zygote in self.zygotes.values():
            zygote.close()


def _local_can_fork() -> bool:
    from harness.sandbox.local import mount_isolation

    return mount_isolation()


# -- one process-wide pool per backend, for grade(warm=True) -----------------------------------------------------
_shared: dict[str, WarmPool] = {}
_shared_lock = threading.Lock()


def shared_pool(sandbox: str = "auto", *, notice=None) -> WarmPool:
    """The process's warm pool for ``sandbox`` (auto resolves to docker or local as :func:`get_sandbox` does),
    made on first use and closed at exit."""
    from harness.sandbox import get_sandbox

    backend = get_sandbox(sandbox, notice=notice)
    with _shared_lock:
        pool = _shared.get(backend.name)
        if pool is None or pool._closed:
            pool = _shared[backend.name] = WarmPool(backend)
        return pool


def close_shared() -> None:
    with _shared_lock:
        pools = list(_shared.values())
        _shared.clear()
    for pool in pools:
        pool.close()


# -- frames, before a session owns the worker -------------------------------------------------------------------
def _forked_by_stale_zygote(handle: WorkerHandle) -> bool:
    """An idle local worker whose zygote's namespace no longer hides everything it must (a new folder)."""
    zygote = getattr(handle.proc, "zygote", None)
    return zygote is not None and zygote.stale()


def _discard(handle: WorkerHandle) -> None:
    try:
        handle.cleanup()
    except Exception:  # best effort: a docker leftover is swept later
        pass


def _stderr_now(handle: WorkerHandle) -> str:
    from harness.core.text import clean_text

    try:
        fd = handle.proc.stderr.fileno()
        if select.select([fd], [], [], 0.2)[0]:
            return clean_text(os.read(fd, 4000).decode("utf-8", "replace"), 300)
    except (OSError, ValueError):
        pass
    return ""


def _write(handle: WorkerHandle, payload: bytes, timeout: float = 10.0) -> None:
    fd = handle.proc.stdin.fileno()
    view = memoryview(payload)
    deadline = time.monotonic() + timeout
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise OSError("the warm worker does not read its input")
        if select.select([], [fd], [], left)[1]:
            view = view[os.write(fd, view[:65536]):]


def _read_frame(handle: WorkerHandle, deadline: float) -> dict:
    """Read exactly one frame without arrays (the idle frame): nothing past it is consumed."""
    fd = handle.proc.stdout.fileno()

    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InfrastructureError("a warm worker did not become idle in time")
            if not select.select([fd], [], [], min(left, 0.25))[0]:
                continue
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise InfrastructureError("a warm worker exited before it was idle")
            buf += chunk
        return bytes(buf)

    try:
        head, specs = wire.parse_header(exact(wire.parse_prefix(exact(wire.HEADER.size))))
    except wire.WireError as exc:
        raise InfrastructureError(f"a warm worker sent a malformed frame: {exc}") from None
    if specs:
        raise InfrastructureError("a warm worker's idle frame carries arrays")
    return head
