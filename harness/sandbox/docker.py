"""Docker sandbox: one hardened, throw-away container per worker start.

The worker runs as ``python3 -I -B /opt/grader/worker.pyc`` (worker.py, compiled when the image is built) inside
the sandbox image (see harness/sandbox.Dockerfile) through ``docker run -i`` so the host keeps plain stdin/stdout
pipes. The container has no network, a read-only root with a size-capped tmpfs at /tmp, no capabilities, no new
privileges, a pids, memory (= memory+swap), CPU and ulimit cap, a non-root user and an init process. The only host
path it sees is a temp dir holding a copy of the submission, mounted read-only at /submission; never the Docker socket.

Containers are not started with ``--rm``: after the worker ends the host inspects ``State.OOMKilled`` and
``State.ExitCode`` for :meth:`DockerHandle.post_mortem`, then removes the container. Leftover labelled
containers (a host that crashed) are swept when a :class:`DockerSandbox` is created.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.core.leftovers import scratch_prefix
from harness.core.process import die_with_parent
from harness.sandbox import engine
from harness.sandbox.base import (DEFAULT_RUNTIME, RUNTIME_ENV, RUNTIMES, WORKER_DIR, WORKER_FILES,
                                  DoctorCheck, Limits, Sandbox, WorkerHandle, malloc_env)

DOCKERFILE = Path(__file__).resolve().parent / "sandbox.Dockerfile"  # shipped inside the package
WORKER_SCRIPT = "/opt/grader/worker.pyc"  # worker.py as the image's build compiled it (sandbox.Dockerfile)
EXCHANGE_PATH = "/exchange"  # the input exchange file inside the container
LABEL = "grader.container"
LABEL_STARTED = "grader.started"
LABEL_DEADLINE = "grader.deadline"
CONTAINER_UID = 10001
IMAGE_REPO = "attn-grader-sandbox"
KEEP_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
PROBE_TIMEOUT_S = 0.8       # engine ping / image inspect during available()
BUSY_PROBE_TIMEOUT_S = 5.0  # available()'s second ask when the first timed out: a busy engine is not a missing one
API_TIMEOUT_S = 15          # other engine calls (kill, inspect, remove)
CREATE_WAIT_S = 10          # a kill waits this long for a container its client is still asking the engine to make
AVAILABLE_TTL_S = 30.0      # how long available() trusts its last answer
MAX_RUN_S_DEFAULT = 1800    # longest a grading run may keep one container; older ones are swept
RUNSC_PATH = "/usr/bin/runsc"
RUNSC_PIDS_PER_TASK = 8     # runsc: host pids per guest task allowed in the container's cgroup (measured ~5)
RUNSC_PIDS_BASE = 256       # runsc: host pids for gVisor's own sentry and gofer threads (measured ~60)
RUNSC_MEMORY_OVERHEAD_MB = 256  # runsc: cgroup memory for gVisor itself, beyond the worker's and the tmpfs's


def _version() -> str:
    from harness.core.version import __version__

    return __version__


def default_image() -> str:
    """The sandbox image to run: ``$GRADER_SANDBOX_IMAGE`` or ``attn-grader-sandbox:<harness version>``."""
    return os.environ.get("GRADER_SANDBOX_IMAGE") or f"{IMAGE_REPO}:{_version()}"


def default_runtime() -> str:
    """The OCI runtime docker containers run under: ``$GRADER_DOCKER_RUNTIME`` (runc|runsc) or runc."""
    return check_runtime(os.environ.get(RUNTIME_ENV) or DEFAULT_RUNTIME)


def check_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        from harness.core.errors import UsageError

        raise UsageError(f"unknown docker runtime {runtime!r} (from --runtime or ${RUNTIME_ENV}); "
                         f"choose {' or '.join(RUNTIMES)}")
    return runtime


def register_hint(runtime: str) -> str:
    """How to register ``runtime`` with the engine (runc always is)."""
    snippet = json.dumps({"runtimes": {"runsc": {"path": RUNSC_PATH, "runtimeArgs": ["--network=none"]}}})
    return (f"install gVisor (Debian: `apt-get install runsc`), merge {snippet} into /etc/docker/daemon.json "
            "(`--network=none` is required: gVisor refuses `--network none` containers in the root network "
            "namespace without it), then reload the engine: `kill -HUP $(pidof dockerd)`; "
            "`bash .ci/docker-setup.sh` does all of this" if runtime == "runsc"
            else f"register {runtime} with the engine (/etc/docker/daemon.json \"runtimes\") and reload dockerd")


def worker_sha256() -> str:
    """Fingerprint of the worker files baked into the image and of the Dockerfile that baked them (label
    ``grader.worker_sha256``): an image built by an older recipe (one without worker.pyc, say) is stale."""
    h = hashlib.sha256()
    for name, path in [*((name, WORKER_DIR / name) for name in WORKER_FILES), ("Dockerfile", DOCKERFILE)]:
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def max_run_s() -> float:
    try:
        return float(os.environ.get("GRADER_SANDBOX_MAX_RUN_S", MAX_RUN_S_DEFAULT))
    except ValueError:
        return float(MAX_RUN_S_DEFAULT)


def docker_cli() -> str | None:
    return shutil.which("docker")


def engine_socket_missing() -> str | None:
    """A reason the engine is certainly unreachable (a unix socket path that does not exist), else None."""
    path = engine.socket_path()
    if path is None:
        return None  # tcp:// or ssh://: only a real call can tell
    if not os.path.exists(path):
        return f"no Docker engine socket at {path}"
    return None


def api_client(timeout: float = API_TIMEOUT_S):
    """A client for the engine named by the environment: this package's own over a unix socket
    (harness/sandbox/engine.py: no import of the Docker SDK on a grade's path), docker-py's low-level APIClient
    for a tcp:// or ssh:// one (``DOCKER_HOST``). Both answer the same calls alike."""
    path = engine.socket_path()
    if path is not None:
        return engine.EngineClient(path, timeout)
    return sdk_client(timeout)


def sdk_client(timeout: float = API_TIMEOUT_S):
    """docker-py's low-level client (building the image; an engine that is not on a unix socket)."""
    import docker

    return docker.APIClient(timeout=timeout, **_client_kwargs())


def _client_kwargs() -> dict:
    from docker.utils import kwargs_from_env

    kwargs = kwargs_from_env()
    kwargs.setdefault("base_url", f"unix://{engine.DEFAULT_SOCKET}")
    kwargs["version"] = "auto"
    return kwargs


def probe(image: str | None = None, *, timeout: float = PROBE_TIMEOUT_S, runtime: str | None = None,
          busy_timeout: float | None = None) -> list[DoctorCheck]:
    """Fast checks, in order, stopping at the first failure: engine reachable, runtime registered (runc always
    is: the engine is only asked about another one), image present, image current. ``busy_timeout``: when an
    engine call timed out, every check is made once more with this timeout (an engine busy removing many
    containers can take seconds to answer a ping, and is not a missing one)."""
    checks, timed_out = _probe(image, timeout, runtime)
    if timed_out and busy_timeout is not None and busy_timeout > timeout:
        checks, _ = _probe(image, busy_timeout, runtime)
    return checks


def _timed_out(exc: BaseException | None) -> bool:
    """Whether an engine call failed by waiting too long (requests' Timeout, a socket timeout), not by an answer;
    also when wrapped: the client's own start asks the engine's API version and raises a DockerException from the
    timeout ("Error while fetching server API version: ... Read timed out")."""
    requests_errors = sys.modules.get("requests.exceptions")  # docker-py's client (a tcp:// engine) raises these
    kinds = (TimeoutError,) + ((requests_errors.Timeout,) if requests_errors is not None else ())
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, kinds):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _probe(image: str | None, timeout: float, runtime: str | None) -> tuple[list[DoctorCheck], bool]:
    """:func:`probe`'s checks with one timeout, and whether a failing one timed out."""
    image = image or default_image()
    runtime = check_runtime(runtime or default_runtime())
    build_hint = "run `grade sandbox build` (air-gapped: `bash .ci/docker-setup.sh`)"
    out: list[DoctorCheck] = []
    engine_hint = ("start the Docker engine (e.g. `dockerd &` as root, or `bash .ci/docker-setup.sh`) "
                   "or check DOCKER_HOST; or grade with --sandbox local")
    if docker_cli() is None:
        out.append(DoctorCheck("engine", False, "the `docker` command is not installed",
                    "install Docker (Debian: `apt-get install docker.io`) or grade with --sandbox local"))
        return out, False
    reason = engine_socket_missing()
    if reason:
        out.append(DoctorCheck("engine", False, reason, engine_hint))
        return out, False
    if engine.socket_path() is None:  # a tcp:// or ssh:// engine: docker-py's client
        try:
            import docker  # noqa: F401
        except ImportError:
            out.append(DoctorCheck("engine", False, "the `docker` Python package is missing",
                                   "pip install 'docker>=7'"))
            return out, False
    try:
        client = api_client(timeout=timeout)
        client.ping()
        server = client.version(api_version=False).get("Version", "?")
    except Exception as exc:  # requests/docker errors of many kinds
        out.append(DoctorCheck("engine", False, f"Docker engine not reachable: {type(exc).__name__}: {str(exc)[:200]}",
                    engine_hint))
        return out, _timed_out(exc)
    out.append(DoctorCheck("engine", True, f"Docker engine {server} reachable", ""))
    slow = False
    try:
        runtime_check = _runtime_registered(client, runtime)
    except Exception as exc:
        runtime_check = DoctorCheck("runtime", False, f"cannot list the engine's runtimes: {type(exc).__name__}: "
                                    f"{str(exc)[:200]}", "check `docker info`")
        slow = _timed_out(exc)
    out.append(runtime_check)
    if not runtime_check.ok:
        client.close()
        return out, slow
    try:
        info = client.inspect_image(image)
    except Exception as exc:
        if engine.is_not_found(exc):
            out.append(DoctorCheck("image", False, f"sandbox image {image} is missing", build_hint))
        else:
            out.append(DoctorCheck("image", False, f"cannot inspect {image}: {type(exc).__name__}: {str(exc)[:200]}",
                        build_hint))
        return out, _timed_out(exc)
    finally:
        client.close()
    out.append(DoctorCheck("image", True, f"sandbox image {image} present ({info.get('Id', '')[7:19]})", ""))
    labels = (info.get("Config") or {}).get("Labels") or {}
    want_version, want_sha = _version(), worker_sha256()
    problems = []
    if labels.get("grader.version") != want_version:
        problems.append(f"grader.version={labels.get('grader.version')!r}, harness is {want_version!r}")
    if labels.get("grader.worker_sha256") != want_sha:
        problems.append("worker files differ from the ones baked into the image "
                        f"(grader.worker_sha256={str(labels.get('grader.worker_sha256'))[:12]}..., "
                        f"harness {want_sha[:12]}...)")
    if problems:
        out.append(DoctorCheck("image current", False, f"sandbox image {image} is stale: " + "; ".join(problems),
                    "rebuild it: `grade sandbox build`"))
    else:
        out.append(DoctorCheck("image current", True, f"labels match harness {want_version} and worker {want_sha[:12]}", ""))
    return out, False


def _runtime_registered(client, runtime: str) -> DoctorCheck:
    if runtime == DEFAULT_RUNTIME:  # built into every engine; `docker info` is not worth its time here
        return DoctorCheck("runtime", True, "runc (Docker's default runtime: containers share the host's kernel)", "")
    runtimes = client.info().get("Runtimes") or {}
    if runtime not in runtimes:
        return DoctorCheck("runtime", False, f"the Docker engine has no runtime {runtime!r} registered "
                           f"(it has {', '.join(sorted(runtimes)) or 'none'})", register_hint(runtime))
    spec = runtimes[runtime] or {}
    args = spec.get("runtimeArgs") or []
    if runtime == "runsc" and "--network=none" not in args:
        return DoctorCheck("runtime", False, f"runsc is registered ({spec.get('path')}) without `--network=none` in "
                           "its runtimeArgs: gVisor then refuses every `--network none` container", register_hint(runtime))
    return DoctorCheck("runtime", True, f"{runtime} registered ({spec.get('path', '?')} {' '.join(args)})".rstrip(), "")


_available_cache: dict[tuple, tuple[float, tuple[str, str, str] | None]] = {}
_sweep_lock = threading.Lock()
_swept = False


def _exchange():
    """A file for the worker's input exchange (harness/sandbox/exchange.py), bind-mounted into the container."""
    from harness.sandbox.exchange import Exchange

    return Exchange.optional(Exchange.file)


class DockerHandle(WorkerHandle):
    def __init__(self, proc: subprocess.Popen, name: str, workdir: str, started: float):
        self.proc = proc
        self.name = name
        self.workdir = workdir
        self.started = started
        self._state: dict | None = None
        self._removed = False
        self._killed = False
        self._client = None
        self._meter = None
        self._meter_reason = ""

    # -- engine calls -------------------------------------------------------------------------------------
    def _api(self):
        if self._client is None:
            self._client = api_client()
        return self._client

    def _inspect(self) -> dict | None:
        if self._state is not None:
            return self._state
        if self._removed:
            return None
        try:
            state = self._api().inspect_container(self.name).get("State") or {}
        except Exception as exc:
            return {"inspect_error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        if not state.get("Running"):
            self._state = state  # final: cache it so post_mortem works after cleanup()
        return state

    def memory_meter(self):
        """The container's memory cgroup as the host sees it (runc: the container's processes; runsc: gVisor's
        whole sandbox), found once through ``docker inspect`` (its id and main pid) and ``/proc/<pid>/cgroup``."""
        if self._meter is None and self._meter_reason == "" and self.proc.poll() is None:
            from harness.sandbox import memory_meter

            try:
                info = self._api().inspect_container(self.name)
            except Exception as exc:
                self._meter_reason = f"cannot inspect container {self.name}: {type(exc).__name__}"
                return None
            state = info.get("State") or {}
            self._meter, self._meter_reason = memory_meter.container_cgroup(str(info.get("Id", "")),
                                                                            state.get("Pid"))
        return self._meter

    def memory_meter_reason(self) -> str:
        return self._meter_reason or "the container is not running"

    def kill(self) -> None:
        self._killed = True
        if self.proc.poll() is None:
            if not self._kill_by_name():  # not running / already gone / engine trouble: stop the client now;
                self.proc.kill()  # cleanup() removes the container by name, the sweep catches a late one
            try:  # the container is dead; a client stuck writing a full pipe need not be waited for
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._inspect()

    def _kill_by_name(self, wait_s: float = CREATE_WAIT_S) -> bool:
        """SIGKILL the container through the engine; whether it took. A container the engine has not made yet (a
        kill right after the start was asked for: a failed check_at_start, an early timeout on a loaded machine)
        is waited for while its ``docker run`` client still runs: stopping the client halfway would leave the
        engine to finish making a container that nobody removes (until a sweep)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._api().kill(self.name, signal="SIGKILL")
                return True
            except Exception as exc:
                if not engine.is_not_found(exc) or self.proc.poll() is not None or time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)

    def post_mortem(self) -> dict:
        info = super().post_mortem()
        info["sandbox"] = "docker"
        info["container"] = self.name
        info["killed_by_host"] = self._killed
        state = self._inspect() if self.proc.poll() is not None else None
        if state:
            if "inspect_error" in state:
                info["inspect_error"] = state["inspect_error"]
            else:
                code = state.get("ExitCode")
                info["container_exit_code"] = code
                info["oom_killed_flag"] = bool(state.get("OOMKilled"))
                if state.get("Error"):
                    info["engine_error"] = str(state["Error"])[:500]
                if isinstance(code, int) and code > 128:
                    info["signal"] = code - 128
                # OOMKilled alone can be set for a child the kernel picked while the worker survived:
                # report an OOM death only when the worker itself died of SIGKILL.
                info["oom_killed"] = bool(state.get("OOMKilled")) and code == 137
                if code is not None:
                    info["exit_code"] = code
        info.setdefault("oom_killed", False)
        return info

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        else:
            self._inspect()
        if not self._removed:
            try:
                self._api().remove_container(self.name, force=True)
            except Exception:  # already gone, or engine trouble: the next sweep removes it
                pass
            self._removed = True
        self._release()

    def hand_off(self) -> None:
        """The end of a grade in a process that ends right after it (``DockerSandbox(hand_off_end=True)``: the
        `grade` CLI's one-shot run), as :class:`~harness.session.channel.WorkerSession` closes it (its ``retire``
        hook): a detached ``docker rm -f`` kills and removes the container, and nothing waits for it, which saves
        the ~50 ms the engine's kill takes. Only a worker still running is handed off (the suite is over: its
        state no longer matters); one that died is inspected and removed here, as :meth:`cleanup` does. A
        removal that never happens (the engine gone meanwhile) is a labelled leftover for the next sweep."""
        self.retire = None
        cli = docker_cli()
        if not self._removed and cli is not None and self.proc.poll() is None:
            try:
                subprocess.Popen([cli, "rm", "-f", self.name], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
            except OSError:
                pass
            else:
                self._killed = self._removed = True
                self.proc.kill()  # the `docker run` client only (the container is the remover's): gone at once
                self.proc.wait()
                self._release()
                return
        self.kill()  # as WorkerSession.close ends any other handle
        self.cleanup()

    def _release(self) -> None:
        """What the host holds for this container: the client's pipes, the API client, the exchange, the folder."""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (OSError, AttributeError):
                pass
        if self._client is not None:
            self._client.close()
            self._client = None
        self.close_exchange()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(self, image: str | None = None, runtime: str | None = None, *, hand_off_end: bool = False):
        self.image = image or default_image()
        self.runtime = check_runtime(runtime or default_runtime())  # runc | runsc (gVisor), `docker run --runtime`
        self._check_pending = False
        self.hand_off_end = hand_off_end  # each handle's end goes to a detached remover (DockerHandle.hand_off)

    # -- availability -------------------------------------------------------------------------------------
    @classmethod
    def available(cls, image: str | None = None, runtime: str | None = None) -> bool:
        """True when the engine answers, the runtime is registered and the sandbox image is present and
        current. Fast and cached."""
        return cls.unavailable_reason(image, runtime) is None

    @classmethod
    def unavailable_reason(cls, image: str | None = None, runtime: str | None = None) -> tuple[str, str, str] | None:
        """Why docker grading cannot run, as the first failing check's ``(name, detail, hint)`` (name: engine,
        runtime, image or image current), or None when it can. Fast and cached like :meth:`available`."""
        image = image or default_image()
        runtime = check_runtime(runtime or default_runtime())
        key = (os.environ.get("DOCKER_HOST", ""), image, runtime)
        now = time.monotonic()
        hit = _available_cache.get(key)
        if hit and now - hit[0] < AVAILABLE_TTL_S:
            return hit[1]
        checks = probe(image, runtime=runtime, busy_timeout=BUSY_PROBE_TIMEOUT_S)
        reason = next(((name, detail, hint) for name, ok, detail, hint in checks if not ok), None)
        _available_cache[key] = (now, reason)
        return reason

    def check_at_start(self) -> None:
        """Run :meth:`check` in the first :meth:`start` instead, right after the container's start is requested:
        the probe (three or four engine calls, a few ms; 100-160 ms when it imported the Docker SDK) then overlaps
        the container's own start rather than coming before it. A failed check stops that container before it
        grades and raises as :meth:`check` would (the one-shot grade, harness/grading/engine.py)."""
        self._check_pending = True

    def check(self) -> None:
        """Raise :class:`SandboxUnavailable` with a fix hint unless docker grading can run."""
        from harness.core.errors import SandboxUnavailable

        for name, ok, detail, hint in probe(self.image, timeout=3.0, runtime=self.runtime):
            if not ok:
                raise SandboxUnavailable(f"docker sandbox unavailable: {detail}", hint=hint, check=name)

    # -- housekeeping -------------------------------------------------------------------------------------
    @staticmethod
    def sweep(*, older_than_s: float | None = None, name_prefix: str = "") -> list[str]:
        """Remove labelled grader containers past their deadline (or older than ``older_than_s``); with
        ``name_prefix``, only those whose name starts with it (e.g. one grader's ``grader-<pid>-``)."""
        limit = max_run_s() if older_than_s is None else older_than_s
        removed = []
        try:
            client = api_client(timeout=5)
            containers = client.containers(all=True, filters={"label": LABEL})
        except Exception:
            return removed
        now = time.time()
        try:
            for c in containers:
                if name_prefix and not any(n.lstrip("/").startswith(name_prefix) for n in c.get("Names") or []):
                    continue
                labels = c.get("Labels") or {}
                try:
                    started = float(labels.get(LABEL_STARTED, c.get("Created", now)))
                except ValueError:
                    started = float(c.get("Created", now))
                try:
                    deadline = float(labels.get(LABEL_DEADLINE, started + limit))
                except ValueError:
                    deadline = started + limit
                if older_than_s is not None:
                    deadline = min(deadline, started + older_than_s)
                exited_long_ago = c.get("State") != "running" and now - started > 120
                if now > deadline or exited_long_ago:
                    try:
                        client.remove_container(c["Id"], force=True)
                        removed.append(c["Id"][:12])
                    except Exception:
                        pass
        finally:
            client.close()
        return removed

    def _sweep_once(self) -> None:
        global _swept
        with _sweep_lock:
            if _swept:
                return
            _swept = True
        self.sweep()

    # -- start --------------------------------------------------------------------------------------------
    def command(self, *, name: str, track: str, entry: str | None, mount_dir: str | None, limits: Limits,
                started: float, warm_up: bool = True, exchange: str | None = None) -> list[str]:
        """The ``docker run`` command line. ``entry=None``: a warm container (no mount; the worker imports, warms
        up, says idle and waits for the submission over its stdin, see :meth:`start_warm`)."""
        mb = 1024 * 1024
        env = {"HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               **malloc_env(limits.metered_memory, track)}
        env.update({k: os.environ[k] for k in KEEP_ENV if k in os.environ})
        memory = f"{self._cgroup_memory_mb(limits)}m"
        cmd = [
            docker_cli() or "docker", "run", "-i", "--name", name,
            "--label", f"{LABEL}=1", "--label", f"{LABEL_STARTED}={started:.0f}",
            "--label", f"{LABEL_DEADLINE}={started + max_run_s():.0f}",
            "--runtime", self.runtime, "--network", "none", "--read-only",
            "--tmpfs", f"/tmp:rw,nosuid,nodev,size={int(limits.tmpfs_mb)}m,mode=1777",
            "--tmpfs", "/dev/mqueue:ro,size=4k",  # --ipc none drops /dev/shm; this hides the writable mqueue
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            *self._pids_flags(int(limits.pids)),
            "--memory", memory, "--memory-swap", memory,
            "--cpus", f"{float(limits.cpus):g}",
            "--ulimit", f"nofile={int(limits.nofile)}:{int(limits.nofile)}",
            "--ulimit", f"fsize={int(limits.fsize_mb) * mb}:{int(limits.fsize_mb) * mb}",
            "--ulimit", "core=0:0",
            "--ulimit", f"cpu={int(limits.cpu_s)}:{int(limits.cpu_s) + 5}",
            "--user", f"{CONTAINER_UID}:{CONTAINER_UID}", "--init",
            "--ipc", "none", "--hostname", "sandbox", "--workdir", "/tmp", "--log-driver", "none",
        ]
        if mount_dir is not None:
            cmd += ["--mount", f"type=bind,source={mount_dir},target=/submission,readonly"]
        if exchange is not None:  # the one file of the host's the worker may write: its arguments (exchange.py)
            cmd += ["--mount", f"type=bind,source={exchange},target={EXCHANGE_PATH}"]
        for key, value in env.items():
            cmd += ["-e", f"{key}={value}"]
        cmd += [self.image, *self._address_space_limit(limits), "python3", "-I", "-B", WORKER_SCRIPT,
                "--track", track]
        if exchange is not None:
            cmd += ["--exchange", EXCHANGE_PATH]
        if entry is None:
            return cmd + ["--warm", "--root", "/tmp"] + ([] if warm_up else ["--no-warm-up"])
        return cmd + ["--entry", entry, "/submission/submission.py"]

    def _pids_flags(self, pids: int) -> list[str]:
        """The process limit. runc: the container's pids cgroup counts exactly the worker's processes and
        threads. runsc: that cgroup also holds gVisor's own host threads and ptrace stubs (about 60 for an idle
        torch worker, ~5 per guest process), and gVisor dies (Go panic, exit 2) when it cannot make one; so the
        worker's own limit is RLIMIT_NPROC, which gVisor enforces per sandbox (its kernel counts only this
        container's uid 10001), and the cgroup gets a ceiling for the whole sandbox."""
        if self.runtime == "runsc":
            return ["--pids-limit", str(RUNSC_PIDS_PER_TASK * pids + RUNSC_PIDS_BASE), "--ulimit", f"nproc={pids}:{pids}"]
        return ["--pids-limit", str(pids)]

    def _cgroup_memory_mb(self, limits: Limits) -> int:
        """runc: ``--memory`` is the worker's limit (an OOM kill is reported as ``memory``). runsc: the cgroup
        also holds gVisor's own memory and its /tmp tmpfs, and gVisor accepts any allocation and lets the host
        OOM-kill the whole sandbox (which Docker flags unreliably); so the worker's limit is its address space
        (:meth:`_address_space_limit`, a MemoryError as in the local backend) and the cgroup gets headroom."""
        if self.runtime == "runsc":
            return int(limits.memory_mb) + int(limits.tmpfs_mb) + RUNSC_MEMORY_OVERHEAD_MB
        return int(limits.memory_mb)

    def _address_space_limit(self, limits: Limits) -> list[str]:
        """runsc: ``RLIMIT_AS`` = ``memory_mb`` for the worker (gVisor enforces it; Docker has no ``--ulimit as``)."""
        if self.runtime == "runsc":
            return ["prlimit", f"--as={int(limits.memory_mb) * 1024 * 1024}"]
        return []

    def start_warm(self, *, track: str, limits: Limits, warm_up: bool = True) -> WorkerHandle:
        """A container for one submission not chosen yet: no host path mounted at all; its worker imports and
        warms up, says ``idle`` and waits for a ``load`` request with the file's bytes (harness/session/warm.py)."""
        from harness.core.errors import InfrastructureError

        self._sweep_once()
        if docker_cli() is None:
            raise InfrastructureError("the `docker` command is not installed")
        started = time.time()
        name = f"grader-{os.getpid()}-{secrets.token_hex(6)}"
        exchange = _exchange()
        cmd = self.command(name=name, track=track, entry=None, mount_dir=None, limits=limits, started=started,
                           warm_up=warm_up, exchange=exchange.path if exchange else None)
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True, preexec_fn=die_with_parent)
        except OSError as exc:
            if exchange:
                exchange.close()
            raise InfrastructureError(f"could not start a warm docker container: {exc}") from exc
        handle = DockerHandle(proc, name, "", started)
        handle.exchange = exchange
        handle.warm = True
        return handle

    def start(self, *, track: str, entry: str, submission: Path, limits: Limits) -> WorkerHandle:
        from harness.core.errors import InfrastructureError

        if docker_cli() is None:
            raise InfrastructureError("the `docker` command is not installed")
        parent = os.environ.get("GRADER_SANDBOX_TMPDIR") or None  # a path the engine's host can also see
        workdir = tempfile.mkdtemp(prefix=scratch_prefix("docker"), dir=parent)
        exchange = None
        try:
            exchange = _exchange()
            os.chmod(workdir, 0o755)  # the container user (uid 10001) must read the submission
            target = os.path.join(workdir, "submission.py")
            shutil.copyfile(submission, target)
            os.chmod(target, 0o444)
            started = time.time()
            name = f"grader-{os.getpid()}-{secrets.token_hex(6)}"
            cmd = self.command(name=name, track=track, entry=entry, mount_dir=workdir, limits=limits,
                               started=started, exchange=exchange.path if exchange else None)
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True, preexec_fn=die_with_parent)
        except OSError as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            if exchange:
                exchange.close()
            raise InfrastructureError(f"could not start the docker sandbox: {exc}") from exc
        handle = DockerHandle(proc, name, workdir, started)
        handle.exchange = exchange
        if self.hand_off_end:  # the process ends right after this grade: the container's end is not waited for
            handle.retire = handle.hand_off
        if self._check_pending:  # while the engine starts the container (check_at_start)
            self._check_pending = False
            try:
                self.check()
            except BaseException:  # a stale image's or a missing runtime's container never grades
                handle.kill()
                handle.cleanup()
                raise
        self._sweep_once()  # after the start is asked for: the engine starts the container meanwhile
        return handle

    def describe(self) -> dict:
        return {"sandbox": self.name, "image": self.image, "docker_runtime": self.runtime}
