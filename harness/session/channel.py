"""The host end of the worker pipe: framed requests with deadlines, a capped stderr, restarts after deaths.

Everything read from the worker is validated by :mod:`harness.worker.wire`; anything malformed is the candidate's
failure (status ``error``), never a crash of the grader.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator

from harness.core.errors import CandidateException, InfrastructureError, WorkerFault
from harness.sandbox.base import Limits, Sandbox, WorkerHandle
from harness.core.text import clean_text


class _StderrPump(threading.Thread):
    """Drains the worker's stderr into a capped buffer; past the cap it flags the flood and stops keeping it.

    :meth:`settle` drains what the pipe holds now from the caller's thread: called once an answer is read whole,
    it counts every byte the worker wrote to stderr before that answer. The worker writes its stderr and then its
    answer in order, and a Docker client relays the engine's stream in order too (stdout and stderr frames one
    after another, each written whole), so a byte of a flood that came first is in the pipe by then; left to this
    thread alone, a busy machine could count the last 64 KiB of a flood after later answers had been read, and the
    flood would land on a later call (even a later test)."""

    def __init__(self, stream: IO[bytes], cap: int, on_flood: Callable[[], None]):
        super().__init__(daemon=True)
        self.cap, self.on_flood = cap, on_flood
        self.chunks: list[bytes] = []
        self.size = 0
        self.flooded = False
        self._lock = threading.Lock()   # one reader at a time, and a chunk read is counted before the next read
        self._eof = False
        # a descriptor of its own: the host closing the stream in a cleanup never leaves it a number to reuse
        self._fd = os.dup(stream.fileno())
        os.set_blocking(self._fd, False)

    def run(self) -> None:
        try:
            while not self._eof:
                select.select([self._fd], [], [])
                with self._lock:
                    self._read_available(once=True)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._eof = True
                os.close(self._fd)

    def settle(self) -> None:
        """Count what the pipe holds now (without waiting for more)."""
        if self._eof:
            return
        try:
            with self._lock:
                self._read_available(once=False)
        except (OSError, ValueError):
            return

    def _read_available(self, *, once: bool) -> None:
        while not self._eof:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self._eof = True
                return
            self._count(chunk)
            if once:
                return

    def _count(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size <= self.cap:
            self.chunks.append(chunk)
        elif not self.flooded:
            self.flooded = True
            # kill from another thread and keep draining: a Docker client blocked on a full stderr pipe
            # would not exit until its pipes move, so a kill waited for here would stall ~15 s
            threading.Thread(target=self.on_flood, daemon=True).start()

    def text(self, limit: int = 2000) -> str:
        return clean_text(b"".join(self.chunks)[-limit * 4:].decode("utf-8", "replace"), limit)


_OUTPUT_FIELDS = {"type": str, "exact_type": bool, "dtype": str, "requires_grad": bool, "unsendable_dtype": str}


def _clean_output_info(info: dict) -> dict:
    clean = {k: info[k] for k, kind in _OUTPUT_FIELDS.items() if isinstance(info.get(k), kind)}
    for key in ("type", "dtype", "unsendable_dtype"):
        if key in clean:
            clean[key] = clean_text(clean[key], 200)
    big = info.get("too_large")
    if isinstance(big, list) and all(type(n) is int for n in big):
        clean["too_large"] = big[:16]
    return clean


def _checked_tree(head: dict) -> None:
    """A tuple output's ``tree`` (nested lists of leaf indices) and ``leaves`` (one output description each):
    every index in range, each used once, bounded nesting; anything else is a malformed frame."""
    from harness.worker.wire import MAX_LEAVES, MAX_TREE_DEPTH, WireError

    leaves = head.get("leaves")
    if not (isinstance(leaves, list) and len(leaves) <= MAX_LEAVES and all(isinstance(x, dict) for x in leaves)):
        raise WireError("frame header field 'leaves' is malformed")
    seen: list[int] = []

    def walk(node: object, depth: int) -> None:
        if type(node) is int:
            seen.append(node)
        elif isinstance(node, list) and depth < MAX_TREE_DEPTH and len(node) <= MAX_LEAVES + 1:
            for item in node:
                walk(item, depth + 1)
        else:
            raise WireError("frame header field 'tree' is malformed")

    walk(head.get("tree"), 0)
    if sorted(seen) != list(range(len(leaves))):
        raise WireError("frame header field 'tree' does not index its leaves exactly once")
    head["leaves"] = [_clean_output_info(x) for x in leaves]


READ_BACK = "read_back"  # a result header field the host sets itself: the INPUT arrays it read back (exchange)
HOST_MEMORY = "host_memory"  # a result header field the host sets itself: the call's memory from the worker's cgroup


def _checked_header(head: dict) -> dict:
    """Type-check the fields the host reads from a frame header. The worker is the candidate's process, so a
    header may be forged: a field of the wrong type is a malformed frame (the candidate's failure), never an
    exception inside the grader."""
    from harness.worker.wire import WireError

    if not isinstance(head.get("kind"), str):
        raise WireError("frame header has no 'kind'")
    if "output" in head:
        info = head["output"]
        if not isinstance(info, dict):
            raise WireError("frame header field 'output' is not an object")
        head["output"] = _clean_output_info(info)
    if "tree" in head or "leaves" in head:
        _checked_tree(head)
    for key in ("params", "buffers"):
        if key in head:
            items = head[key]
            if not (isinstance(items, list) and all(
                    isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("shape"), list)
                    and len(p["shape"]) <= 16 and all(type(n) is int and 0 <= n < 2 ** 40 for n in p["shape"])
                    for p in items)):
                raise WireError(f"frame header field {key!r} is malformed")
            head[key] = [{"name": clean_text(p["name"], 200), "shape": p["shape"],
                          "dtype": clean_text(str(p.get("dtype", "")), 40)} for p in items[:200]]
    if "value" in head:  # a plain value (the python track): decoded strictly here, a forged tree is malformed
        from harness.worker.wire import decode_value

        head["value"] = decode_value(head["value"])
    if "flops" in head and not (head["flops"] is None or type(head["flops"]) is int):
        raise WireError("frame header field 'flops' is not an integer")
    if "memory" in head:
        mem = head["memory"]
        if not (isinstance(mem, dict) and type(mem.get("peak_bytes")) is int and 0 <= mem["peak_bytes"] < 2 ** 62):
            raise WireError("frame header field 'memory' is malformed")
        head["memory"] = {k: v for k, v in mem.items()
                          if k in ("peak_bytes", "numpy_peak_bytes", "torch_peak_bytes") and type(v) is int}
        head["memory"]["method"] = clean_text(str(mem.get("method", "")), 60)
        head["memory"]["intact"] = mem.get("intact") is True
    return head


PIPELINE_AHEAD = 3  # requests of a pipeline sent before the answer to the first is read (WorkerSession.pipeline)
BOOT_ATTEMPTS = 3  # a worker that cannot boot is started this many times in all before the run is an infra fault


class WorkerSession:
    """One submission's worker, restarted (a bounded number of times) after a call kills it."""

    def __init__(self, sandbox: Sandbox, *, track: str, entry: str, submission: Path, limits: Limits):
        self.sandbox, self.track, self.entry, self.submission, self.limits = sandbox, track, entry, submission, limits
        self.handle: WorkerHandle | None = None
        self.pump: _StderrPump | None = None
        self.ready_error: CandidateException | None = None
        self.restarts = 0
        self.starts = 0
        self.tripwires: set[str] = set()
        self.calls_s = 0.0  # the seconds the worker says it spent in the candidate's code (wire.CALL_S; no verdict's)
        self._kill_lock = threading.Lock()
        self._ready = False
        self.start_time = 0.0
        self.boot_time = 0.0
        self.exhausted: WorkerFault | None = None
        self.created = time.monotonic()
        self.worker_versions: dict = {}
        self.read_back: dict | None = None  # the last request's arguments as the host read them back (exchange)
        self.readback_log: dict = {}        # calls whose inputs the host read back / the worker reported, and why
        self.boot_memory: int | None = None  # the worker's cgroup usage when its boot frame arrived (host-read)
        self._batches = 0                     # pipelines so far (each one's requests carry its number, wire.BATCH)

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker without waiting for it (its imports overlap the host's own set-up)."""
        try:
            self.handle = self.sandbox.start(track=self.track, entry=self.entry, submission=self.submission,
                                             limits=self.limits)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise InfrastructureError(f"the {self.sandbox.name} sandbox could not start: {exc}") from exc
        self.starts += 1
        self.start_time = time.monotonic()
        self._ready = False
        self.ready_error = None
        self._buf = bytearray()
        handle = self.handle
        self.pump = _StderrPump(handle.proc.stderr, self.limits.output_bytes, lambda: self._locked_kill(handle))
        self.pump.start()

    def close(self) -> None:
        """Stop the worker now: nothing it could still do matters once the suite is over. A handle with a
        ``retire`` hook (a warm Docker container) is handed back to its pool, which kills and removes it in the
        background: the report does not wait for the engine (it is never used again)."""
        if self.handle is not None:
            retire = getattr(self.handle, "retire", None)
            if retire is not None:
                retire()
            else:
                self._kill()
                self.handle.cleanup()
            self.handle = None

    def _kill(self) -> None:
        """Kill the worker while a thread drains its protocol pipe: a Docker client blocked writing a full pipe
        would otherwise not exit (and the kill would wait for it) until its own timeout."""
        handle = self.handle

        def drain(stream: IO[bytes]) -> None:
            try:
                while stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                    pass
            except (OSError, ValueError):  # closed by cleanup()
                pass

        if handle.proc.stdout is not None and handle.proc.poll() is None:
            threading.Thread(target=drain, args=(handle.proc.stdout,), daemon=True).start()
        self._locked_kill(handle)

    def _locked_kill(self, handle: WorkerHandle) -> None:
        """handle.kill() from one thread at a time (the stderr pump kills a flooding worker from its own thread)."""
        with self._kill_lock:
            handle.kill()

    def _restart(self) -> None:
        self.close()
        if self.restarts >= self.limits.max_restarts:
            self.exhausted = WorkerFault("error", f"worker restart budget ({self.limits.max_restarts}) exhausted; "
                                                  "remaining tests are not run")
            raise self.exhausted
        self.restarts += 1
        self.start()

    def ensure_ready(self) -> None:
        """Wait for the worker's boot and ready frames. An import failure or a death at start-up is permanent for
        this submission (it would happen again): every later request re-raises it without a restart."""
        if self.exhausted:
            raise self.exhausted
        if self.handle is None:
            self.start()
        if self._ready:
            if self.ready_error:
                raise self.ready_error
            return
        from harness.worker import wire  # here, not at the top: the worker starts before the host pays for NumPy

        self._boot()
        deadline = self.boot_time + self.limits.startup_timeout_s
        try:
            head, _ = self._read_frame(deadline, phase="start-up")
        except WorkerFault as fault:
            self.ready_error = fault
            raise
        self._ready = True
        if head.get("kind") == wire.ERROR:
            self.ready_error = self._candidate_exception(head)
            raise self.ready_error
        if head.get("kind") != wire.READY:
            self.ready_error = self._fault("error", f"worker sent {str(head.get('kind'))[:40]!r} instead of ready")
            raise self.ready_error
        versions = head.get("versions")
        if isinstance(versions, dict):  # what the worker says it runs (informative: it is the worker's claim)
            self.worker_versions = {clean_text(str(k), 20): clean_text(str(v), 40) for k, v in list(versions.items())[:4]}

    def _boot(self) -> None:
        """Wait for the boot frame: the sandbox is set up and the worker's own imports are done, and nothing of
        the candidate's has been read yet. A worker that dies, hangs or babbles before it is the grader's fault
        (a sandbox that could not be set up, an image without torch, limits too small for the interpreter): it
        is started afresh up to BOOT_ATTEMPTS times in all, then the whole run is an infrastructure error."""
        from harness.worker import wire

        failures: list[str] = []
        while True:
            try:
                head, _ = self._read_frame(self.start_time + self.limits.startup_timeout_s, phase="boot")
                if head.get("kind") == wire.BOOT:
                    self.boot_time = time.monotonic()
                    self.boot_memory = self._start_memory()
                    exchange = getattr(self.handle, "exchange", None)
                    if exchange is not None:  # nothing of the candidate's has run: the handshake is the worker's
                        exchange.verify()
                    return
                failures.append(f"the worker sent {clean_text(str(head.get('kind')), 40)!r} before booting")
            except WorkerFault as fault:
                tail = fault.diagnostics.get("stderr_tail", "")
                failures.append(fault.message + (f"; worker stderr: {clean_text(tail, 300)}" if tail else ""))
            self._ready = False
            if len(failures) >= BOOT_ATTEMPTS:
                self.close()
                raise InfrastructureError(
                    f"the {self.sandbox.name} sandbox could not start a worker ({len(failures)} attempts): "
                    f"{failures[-1]}", attempts=failures)
            self.close()
            time.sleep(0.2 * len(failures))
            self.start()

    # -- requests ---------------------------------------------------------------------------------
    def request(self, header: dict, arrays: dict | None = None, *, readback: bool = False) -> tuple[dict, dict]:
        """Send one request, wait for its answer. Raises WorkerFault or CandidateException. ``readback``: hand the
        array arguments over through the worker's input exchange and read them back after the answer: they
        replace the worker's INPUT arrays, and the header's ``read_back`` names them (also in :attr:`read_back`;
        None when the worker has no working exchange: it reports its inputs itself)."""
        if self.handle is not None and self._ready and not self.ready_error and self.handle.proc.poll() is not None:
            self._restart()
        self.ensure_ready()
        from harness.worker import wire  # imported here so the worker starts before the host pays for NumPy

        self.read_back, placed = None, None
        if readback:
            exchange = getattr(self.handle, "exchange", None)
            if exchange is not None and exchange.verified:
                arrays = dict(arrays or {})
                placed = exchange.place(header, arrays, self.track)
                self.readback_log["host"] = self.readback_log.get("host", 0) + 1
            else:
                self.readback_log["worker"] = self.readback_log.get("worker", 0) + 1
                self.readback_log["reason"] = exchange.reason if exchange is not None else \
                    f"the {self.sandbox.name} sandbox offers no input exchange"
        payload = wire.encode_frame(header, arrays)
        meter = self.handle.memory_meter() if header.get(wire.MEMORY) else None
        now = time.monotonic()
        budget_end = self.created + self.limits.total_timeout_s
        if now >= budget_end:
            raise self._budget_spent()
        deadline = min(now + self.limits.call_timeout_s, budget_end)
        metering = meter is not None and meter.begin()
        try:
            try:
                self._write_all(payload, deadline)
            except (BrokenPipeError, OSError):
                raise self._fault_after_death("the worker closed its input") from None
            head, arrs = self._read_frame(deadline, phase="call")
            measured = meter.end() if metering else None
        finally:
            if meter is not None:
                meter.end_sampling()
        head.pop(HOST_MEMORY, None)  # only the host says what it measured
        if header.get(wire.MEMORY):
            head[HOST_MEMORY] = self._host_memory(measured)
        self._raise_for(head)
        head.pop(READ_BACK, None)  # only the host says what it read back
        if placed is not None:
            self.read_back = self.handle.exchange.read_back(placed)
            arrs = dict(arrs, **{wire.INPUT + name: value for name, value in self.read_back.items()})
            head[READ_BACK] = sorted(self.read_back)  # these INPUT arrays are the host's, not the worker's word
        return head, arrs

    def _budget_spent(self) -> WorkerFault:
        """The fault of a submission whose grading budget is used up (kept: the remaining tests are not run)."""
        self.exhausted = WorkerFault("timeout", f"the submission used up its grading budget of "
                                                f"{self.limits.total_timeout_s:g} s; remaining tests are not run",
                                     {"total_timeout_s": self.limits.total_timeout_s})
        return self.exhausted

    def _raise_for(self, head: dict) -> None:
        """An answer that is the candidate's exception (CandidateException) or a fault the worker reports."""
        from harness.worker import wire

        kind = head.get("kind")
        if kind == wire.ERROR:
            raise self._candidate_exception(head)
        if kind == wire.FAULT:
            status = head.get("status") if head.get("status") in ("memory",) else "error"
            raise WorkerFault(status, clean_text(str(head.get("message", "")), 500), {"reported_by": "worker"})

    def pipeline(self, requests: Iterable[tuple[dict, dict]], ahead: int = PIPELINE_AHEAD
                 ) -> Iterator[tuple[dict, dict] | CandidateException]:
        """Plain requests (no ``memory``, no read-back) sent ahead of their answers: up to ``ahead`` wait in the
        worker's input while the caller checks an earlier answer, so the worker computes while the host checks.
        Yields each answer in order, as :meth:`request` returns it, or the CandidateException it would raise (the
        worker goes on with the next request); raises WorkerFault as :meth:`request` would, and nothing more comes.

        The same report as one :meth:`request` after another: each answer has its own deadline (the call timeout,
        from when the previous answer arrived or the request was queued, whichever is later, within the grading
        budget); a fault the worker reports ends the batch on its side too (the requests behind it are dropped
        unanswered, wire.BATCH); a death, a timeout, a flood or a malformed frame ends it as before (the worker is
        killed, the next request restarts it). ``requests`` is drawn lazily, ``ahead`` at a time. Frames are
        written by a thread of their own (a full pipe must not block the reader); it only ever writes bytes."""
        import queue

        from harness.worker import wire

        if self.handle is not None and self._ready and not self.ready_error and self.handle.proc.poll() is not None:
            self._restart()
        self.ensure_ready()
        self.read_back = None
        self._batches += 1
        batch = self._batches
        fd = self.handle.proc.stdin.fileno()
        frames: queue.SimpleQueue = queue.SimpleQueue()
        queued: list[float] = []

        def write() -> None:
            while (payload := frames.get()) is not None:
                try:
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view[:1 << 20]):]
                except OSError:  # the worker is gone (killed at a fault): nothing more to send
                    return

        source = iter(requests)

        def queue_next() -> bool:
            for header, arrays in source:
                if header.get(wire.MEMORY):
                    raise ValueError("pipeline(): a request with memory measurement goes through request()")
                frames.put(wire.encode_frame(dict(header, **{wire.BATCH: batch}), arrays))
                queued.append(time.monotonic())
                return True
            return False

        writer = threading.Thread(target=write, daemon=True, name="worker-pipeline")
        writer.start()
        budget_end = self.created + self.limits.total_timeout_s
        answered, ended, since = 0, False, time.monotonic()
        try:
            for _ in range(max(1, ahead)):
                if not queue_next():
                    break
            while answered < len(queued):
                now = time.monotonic()
                if now >= budget_end:
                    raise self._budget_spent()
                deadline = min(max(since, queued[answered]) + self.limits.call_timeout_s, budget_end)
                head, arrs = self._read_frame(deadline, phase="call", ahead=True)
                since = time.monotonic()
                answered += 1
                queue_next()
                head.pop(HOST_MEMORY, None)
                try:
                    self._raise_for(head)
                except CandidateException as exc:
                    yield exc
                    continue
                except WorkerFault:
                    ended = True  # the worker drops the rest of this batch
                    raise
                head.pop(READ_BACK, None)
                yield head, arrs
            ended = True
        finally:
            frames.put(None)
            if not ended and self.handle is not None and self.handle.proc.poll() is None:
                self._kill()  # answers still due: nothing else may read them as its own
                self._ready = True
            writer.join(self.limits.call_timeout_s)
            if writer.is_alive() and self.handle is not None:  # a worker that stopped reading its input
                self._kill()
                self._ready = True
                writer.join(5)

    def _start_memory(self) -> int | None:
        """The worker's cgroup usage before anything of the candidate's ran: a warm worker's as its pool read it
        while idle, before the file was sent; a cold one's as the boot frame arrives (the candidate's import starts
        right after the frame is sent, so memory it takes within the host's reaction time counts as the baseline)."""
        idle = getattr(self.handle, "idle_memory", None)
        if idle is not None:
            return idle
        meter = self.handle.memory_meter()
        return meter.current() if meter is not None else None

    def _host_memory(self, measured: dict | None) -> dict:
        """The call's memory as the host measured it (harness/sandbox/memory_meter.py), with ``held_bytes`` (what
        the worker held before the call beyond its usage at boot), or ``{"unavailable": why}``."""
        if measured is None:
            return {"unavailable": self.handle.memory_meter_reason() if self.handle.memory_meter() is None
                    else "the worker's cgroup memory counters could not be reset or read"}
        if self.boot_memory is not None:
            measured["held_bytes"] = max(0, measured["baseline_bytes"] - self.boot_memory)
        return measured

    def _write_all(self, payload: bytes, deadline: float) -> None:
        fd = self.handle.proc.stdin.fileno()
        view = memoryview(payload)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._kill_for_timeout()
            _, writable, _ = select.select([], [fd], [], remaining)
            if writable:
                n = os.write(fd, view[:65536])
                view = view[n:]

    def _read_exact(self, n: int, deadline: float, phase: str, ahead: bool = False) -> bytes:
        """``ahead``: the answer to a request sent ahead (pipeline). Once the output cap is crossed, an answer that is
        already here whole was written before the flood (the worker had run ahead into a later request, whose
        answer then takes the fault); anything else takes it now, as one request after another would."""
        fd = self.handle.proc.stdout.fileno()
        while len(self._buf) < n:
            if self.pump.flooded:
                if ahead:
                    self._take_available(fd)
                    if len(self._buf) >= n:
                        break
                raise self._fault_output_limit()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._kill_for_timeout(phase)
            readable, _, _ = select.select([fd], [], [], min(remaining, 0.25))
            if not readable:
                continue
            chunk = os.read(fd, max(65536, min(n - len(self._buf), 1 << 24)))
            if not chunk:
                if self.pump.flooded:
                    raise self._fault_output_limit()
                raise self._fault_after_death(f"the worker exited during {phase}")
            self._buf += chunk
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _take_available(self, fd: int) -> None:
        """Whatever the worker's output pipe holds now, without waiting."""
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return
            self._buf += chunk

    def _read_frame(self, deadline: float, phase: str, ahead: bool = False) -> tuple[dict, dict]:
        from harness.worker import wire

        try:
            length = wire.parse_prefix(self._read_exact(wire.HEADER.size, deadline, phase, ahead))
            head, specs = wire.parse_header(self._read_exact(length, deadline, phase, ahead))
            arrays = {name: wire.decode_array(self._read_exact(n, deadline, phase, ahead)) for name, n in specs}
            head = _checked_header(head)
        except (wire.WireError, RecursionError) as exc:  # RecursionError: JSON nested 100k deep
            if isinstance(exc, RecursionError):
                exc = wire.WireError("frame header nests too deeply")
            self._kill()
            self._ready = True  # the next request restarts the worker
            raise WorkerFault("error", f"malformed frame from the worker: {clean_text(str(exc), 300)}",
                              {"protocol_error": clean_text(str(exc), 300)}) from None
        if self.pump is not None:  # every byte written to stderr before this answer is counted now (_StderrPump)
            self.pump.settle()
            if self.pump.flooded and not ahead:
                raise self._fault_output_limit()
        spent = head.pop(wire.CALL_S, None)  # the worker's word on its time in the candidate's code (benchmarks)
        if type(spent) is float and 0.0 <= spent <= self.limits.call_timeout_s + 1:
            self.calls_s += spent
        trip = head.get("tripwires")
        if isinstance(trip, list):
            self.tripwires.update(clean_text(str(t), 80) for t in trip[:10])
        return head, arrays

    # -- failures ---------------------------------------------------------------------------------
    def _candidate_exception(self, head: dict) -> CandidateException:
        return CandidateException(clean_text(str(head.get("type", "Exception")), 100),
                                  clean_text(str(head.get("message", "")), 1000),
                                  clean_text(str(head.get("traceback", "")), 2000, keep_newlines=True),
                                  phase=clean_text(str(head.get("phase", "call")), 20))

    def _evidence(self) -> dict:
        info = dict(self.handle.post_mortem()) if self.handle else {}
        if self.pump is not None:
            tail = self.pump.text(600)
            if tail:
                info["stderr_tail"] = tail
            info["output_bytes"] = self.pump.size
        return info

    def _kill_for_timeout(self, phase: str = "call") -> WorkerFault:
        limit = self.limits.startup_timeout_s if phase == "start-up" else self.limits.call_timeout_s
        self._kill()
        self._ready = True
        evidence = self._evidence()
        if evidence.get("oom_killed"):  # a cgroup OOM kill can look like silence until the host gives up
            return self._fault("memory", f"out of memory during {phase} (the container was OOM-killed)", **evidence)
        return self._fault("timeout", f"no answer within {limit:g} s during {phase}; the worker was killed",
                           wall_clock_limit_s=limit)

    def _fault_output_limit(self) -> WorkerFault:
        self._kill()
        self._ready = True
        return self._fault("output_limit", f"the submission wrote more than {self.limits.output_bytes} bytes to "
                                           "stdout/stderr; output was cut and the worker killed",
                           output_cap_bytes=self.limits.output_bytes)

    def _fault_after_death(self, what: str) -> WorkerFault:
        try:
            self.handle.proc.wait(timeout=5)
        except Exception:
            self.handle.kill()
        if self.pump is not None:  # the worker is gone: let the pump read its last words before they are quoted
            self.pump.join(timeout=1.0)
        self._ready = True
        evidence = self._evidence()
        sig = evidence.get("signal")
        if evidence.get("oom_killed") or "MemoryError" in evidence.get("stderr_tail", ""):
            return self._fault("memory", f"{what}: out of memory", **evidence)
        if sig == signal.SIGXCPU:  # the CPU-seconds rlimit
            return self._fault("timeout", f"{what}: CPU time limit exceeded", **evidence)
        detail = f"signal {sig}" if sig else f"exit code {evidence.get('exit_code')}"
        return self._fault("error", f"{what} ({detail})", **evidence)

    def _fault(self, status: str, message: str, **evidence) -> WorkerFault:
        diagnostics = self._evidence() if self.handle else {}
        diagnostics.update(evidence)
        return WorkerFault(status, message, diagnostics)
