"""Local process sandbox: a fresh temp dir, rlimits, a scrubbed environment and, when the machine allows it,
private network, PID and mount namespaces. Convenient on a laptop; NOT an isolation boundary (see SECURITY.md).

With a mount namespace (root, or unprivileged user namespaces) the worker also gets, best effort:

* a private /proc (other processes' command lines, working directories and environments are invisible);
* every mount re-mounted read-only, except a size-capped tmpfs that is its home, temp and working directory;
* the grader's own installation (harness, graders, reference, exercises and a source checkout holding them),
  /run and /var/run (the Docker socket lives there) covered by empty read-only tmpfs mounts.

Where that is not permitted it falls back to network + PID namespaces, then to a plain process group.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from harness.core.answers import answers_dir
from harness.core.leftovers import scratch_prefix
from harness.core.process import die_with_parent
from harness.sandbox import bytecode, cgroup
from harness.sandbox.base import WORKER_DIR, WORKER_FILES, Limits, Sandbox, WorkerHandle, malloc_env

KEEP_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LD_LIBRARY_PATH")
GRADER_PACKAGES = ("harness", "graders", "reference", "exercises")
# Top-level folders an interpreter needs; with a mount namespace every other top-level folder is covered.
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys", "tmp", "nix")
SENSITIVE = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
             "/etc/ssh")

# Stand-alone scripts run by the local backend: the mount-namespace set-up before the worker, and its probe.
MOUNT_SETUP = Path(__file__).resolve().parent / "mount_setup.py"
MOUNT_PROBE = Path(__file__).resolve().parent / "mount_probe.py"
# the interpreter flags of every local worker, its zygote and the mount set-up they run in: isolated, no bytecode
# written, and no ``site`` (its folders are given, :func:`site_dirs`; no .pth file's code runs in the sandbox)
WORKER_FLAGS = ("-I", "-S", "-B")


@functools.lru_cache(maxsize=1)
def namespace_prefix() -> tuple[str, ...]:
    """``unshare`` arguments for a private network + PID namespace, or () where not permitted."""
    exe = shutil.which("unshare")
    if not exe:
        return ()
    options = ((exe, "--net", "--pid", "--fork", "--kill-child"),
               (exe, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child"))
    chosen = _kept_choice("namespaces", exe, [(*args, "true") for args in options])
    return () if chosen is None else options[chosen]


def _kept_choice(kind: str, exe: str, commands: list) -> int | None:
    """The index of the first of ``commands`` that succeeds here, or None. An earlier run's choice this boot is
    read back (saving a CLI run a process start each, ~2-5 ms). Only a choice is kept: where none works, every run
    asks again (a feature allowed later is used at once, never a weaker sandbox than the machine allows)."""
    cache = _probe_cache(kind, exe)
    try:
        kept = cache.read_text() if cache is not None else ""
    except OSError:
        kept = ""
    if kept.isdigit() and int(kept) < len(commands):
        return int(kept)
    for i, command in enumerate(commands):
        try:
            ok = subprocess.run(command, capture_output=True, timeout=5).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            _remember(cache, str(i))
            return i
    return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=1)
def _needed() -> tuple[str, ...]:
    """Folders the worker needs to see: the interpreter, its libraries, site-packages, NumPy, torch."""
    keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    keep.update(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)
    keep.update(_site_packages())
    keep.update(_array_library_sites())
    return tuple(sorted({os.path.realpath(p) for p in keep if p}))


def _site_packages() -> list[str]:
    """This interpreter's site-packages folders (a venv's, and the base's where the venv includes it)."""
    import site

    try:
        return list(site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        return []


def _array_library_sites() -> list[str]:
    """The folders NumPy and torch are installed in (the whole site folder: wheels keep libraries beside the
    package, numpy.libs)."""
    import importlib.util

    found = []
    for mod in ("numpy", "torch"):
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec and spec.origin:
            found.append(os.path.dirname(os.path.dirname(spec.origin)))
    return found


@functools.lru_cache(maxsize=1)
def site_dirs() -> tuple[str, ...]:
    """The folders ``site`` puts on ``sys.path`` in this interpreter, which a local worker (started with ``-S``,
    harness/worker/worker.py ``_without_site``) is given instead: each site-packages folder (a venv's, and the
    base's where the venv includes it), then the folders its .pth files name, as ``site`` adds them; a .pth
    file's ``import`` lines are what the worker leaves out. NumPy's and torch's folders are added if they lie
    elsewhere."""
    dirs: list[str] = []

    def add(path: str) -> None:
        path = os.path.abspath(path)
        if path not in dirs and os.path.exists(path):  # as site adds them: a folder, or a zip a .pth names
            dirs.append(path)

    for sitedir in _site_packages():
        if not os.path.isdir(sitedir):
            continue
        add(sitedir)
        for name in sorted(n for n in os.listdir(sitedir) if n.endswith(".pth") and not n.startswith(".")):
            try:
                with open(os.path.join(sitedir, name), encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                if line.strip() and not line.startswith(("#", "import ", "import\t")):
                    add(os.path.join(sitedir, line.rstrip()))
    for folder in _array_library_sites():
        add(folder)
    return tuple(dirs)


def cover_tmp() -> bool:
    """Whether the worker's tmpfs can replace /tmp: not when /tmp itself is (inside) a folder the interpreter
    needs. Folders it needs *under* /tmp (a venv there) are mounted back into the new /tmp (see mount_setup.py)."""
    tmp = os.path.realpath("/tmp")
    return os.path.isdir("/tmp") and not any(_inside(tmp, k) for k in _needed())


def keeps(cover: bool, hidden) -> list[str]:
    """The folders the worker needs (outermost only) that lie inside what the set-up covers (/tmp when
    ``cover``, and the hidden folders): mount_setup.py carries them across, so only they show there."""
    tmp = os.path.realpath("/tmp")
    covered = ([tmp] if cover else []) + [h for h in hidden if os.path.isdir(h)]
    inside = sorted(k for k in _needed() if any(_inside(k, c) for c in covered))
    outer = [k for k in inside if not any(o != k and _inside(k, o) for o in inside)]
    return [os.path.join("/tmp", os.path.relpath(k, tmp)) if cover and _inside(k, tmp) else k for k in outer]


@functools.lru_cache(maxsize=1)
def _grader_dirs() -> frozenset[str]:
    """The grader's own packages and a source checkout holding them, wherever they are: they cannot move
    while this process runs, so they are looked up once."""
    import importlib.util

    packages = set()
    for name in GRADER_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec else []:
            if os.path.isdir(loc):
                packages.add(os.path.realpath(loc))
    found = set(packages)
    for parent in {os.path.dirname(d) for d in packages}:
        if any(os.path.exists(os.path.join(parent, m)) for m in ("pyproject.toml", "setup.py", ".git")):
            found.add(parent)
    return frozenset(found)


def hidden_paths() -> tuple[str, ...]:
    """What the worker must not see (when a mount namespace is available): every top-level folder but the
    system ones, the grader's own packages and a source checkout holding them wherever they are, and a few
    credential files, and the folder of the oracle's kept answers. A hidden folder that holds something in
    :func:`_needed` is covered all the same, and the needed folders are mounted back inside it (:func:`keeps`);
    /tmp is replaced, not hidden.

    Computed anew for every worker (and zygote) start — a listing of ``/``, microseconds: a folder made after
    a long-running grader (`grade serve`) started is hidden like the others (a warm pool replaces a zygote
    whose list is out of date, :meth:`Zygote.stale`)."""
    found: set[str] = set()
    try:
        top = os.listdir("/")
    except OSError:
        top = []
    for name in top:
        path = os.path.join("/", name)
        if name not in SYSTEM_DIRS and os.path.isdir(path) and not os.path.islink(path):
            found.add(path)
    found |= _grader_dirs()
    found.update(p for p in SENSITIVE if os.path.exists(p))
    kept = os.path.realpath(answers_dir())  # the oracle's kept answers (harness/core/answers.py), wherever they are
    if os.path.isdir(kept):
        found.add(kept)
    tmp = os.path.realpath("/tmp")
    found = {d for d in found if d != "/" and not _inside(tmp, d)}
    return tuple(sorted(d for d in found if not any(o != d and _inside(d, o) for o in found)))


def _mount_command(prefix: tuple[str, ...], box: str, size_mb: int, cover: bool, hidden,
                   command: list[str], *, in_place: bool = False, **limits_in_setup) -> list[str]:
    """``command``: what mount_setup.py executes once the namespace is set up; with ``in_place``, a Python script
    and its arguments, which it runs in its own interpreter (started as ``-I -S -B`` either way, the worker's
    flags): the worker's start saves an interpreter's start and the set-up's imports (~15 ms).
    ``limits_in_setup``: ``join`` (descriptors of the worker's cgroup.procs files) and ``rlimits``, which
    mount_setup.py applies first, for a start without ``preexec_fn`` (:func:`_setpriv`)."""
    spec = {"box": box, "size_mb": int(size_mb), "cover": cover, "keep": keeps(cover, hidden), "hidden": list(hidden),
            **limits_in_setup, **({"in_place": True} if in_place else {})}
    return [prefix[0], "--mount", "--mount-proc", *prefix[1:], sys.executable, *WORKER_FLAGS, str(MOUNT_SETUP),
            json.dumps(spec), *command]


@functools.lru_cache(maxsize=1)
def _setpriv() -> str | None:
    """util-linux's ``setpriv`` where it can set the parent-death signal (2.33+), else None. With it and the mount
    namespace, the worker starts without ``preexec_fn``: ``setpriv --pdeathsig KILL`` gives unshare what
    :func:`die_with_parent` gave it, and mount_setup.py joins the cgroup and sets the rlimits before anything of
    the worker runs, so ``subprocess`` can vfork instead of forking the whole host and running Python in the child
    (10-20 ms of a one-shot grade's critical path)."""
    exe = shutil.which("setpriv")
    if not exe or _kept_choice("setpriv", exe, [[exe, "--pdeathsig", "KILL", "--", "true"]]) is None:
        return None
    return exe


def _probe_cache(kind: str = "mount-probe", *extra: str) -> Path | None:
    """Where a probe's verdict (``kind``: the mount probe, the namespaces ``unshare`` allows) is remembered for
    this boot, user, interpreter, harness version and set-up scripts."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    from harness.core.version import __version__

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attn-grader"
    import hashlib

    scripts = MOUNT_SETUP.read_text() + MOUNT_PROBE.read_text()
    digest = hashlib.sha256("\0".join((sys.executable, __version__, scripts, *extra)).encode()).hexdigest()
    key = f"{boot}-{os.getuid()}-{digest[:16]}"
    return base / f"{kind}-{key}"


def _remember(cache: Path | None, verdict: str) -> None:
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(verdict)
        except OSError:
            pass


@functools.lru_cache(maxsize=1)
def mount_isolation() -> bool:
    """True when the mount-namespace variant works here: checked by running it, once per boot (the verdict is
    cached on disk, so a CLI run does not pay ~30 ms for the probe every time)."""
    prefix = namespace_prefix()
    if not prefix or os.environ.get("GRADER_LOCAL_NO_MOUNT_NS"):
        return False
    cache = _probe_cache()
    if cache is not None and cache.exists():
        return cache.read_text() == "ok"
    ok = _run_mount_probe(prefix)
    _remember(cache, "ok" if ok else "no")
    return ok


def _run_mount_probe(prefix: tuple[str, ...]) -> bool:
    probe = tempfile.mkdtemp(prefix=scratch_prefix("probe"))
    try:
        box = os.path.join(probe, "box")
        for folder in (box, os.path.join(probe, ".worker")):
            os.mkdir(folder)
        for script in (MOUNT_SETUP, MOUNT_PROBE):  # the probe runs from the box: the grader is hidden by then
            shutil.copyfile(script, os.path.join(probe, ".worker", script.name))
        open(os.path.join(probe, "submission.py"), "w").close()
        cover = cover_tmp()
        root = "/tmp" if cover else box
        hidden = [d for d in hidden_paths() if cover or not _inside(os.path.realpath(probe), d)]
        check = json.dumps({"hidden": hidden, "keep": keeps(cover, hidden)})
        cmd = _mount_command(prefix, box, 1, cover, hidden, [sys.executable, "-I", "-S", "-B",
                                                             os.path.join(root, ".worker", MOUNT_PROBE.name), root,
                                                             check])
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=10, env=scrubbed_env(os.path.join(root, "home")),
                                  cwd=probe)
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def scrubbed_env(home: str, metered_memory: bool = False, track: str = "numpy") -> dict:
    """A worker's (or zygote's) whole environment; ``metered_memory`` and ``track``: its malloc's settings
    (base.malloc_env; a zygote's children set their own)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", **malloc_env(metered_memory, track)}
    env.update({k: os.environ[k] for k in KEEP_ENV if k in os.environ})
    return env


def rlimits(limits: Limits) -> dict[str, tuple[int, int]]:
    """The worker's rlimits (soft, hard), by ``resource`` constant name."""
    mb = 1024 * 1024
    return {"RLIMIT_AS": (limits.memory_mb * mb, limits.memory_mb * mb), "RLIMIT_CPU": (limits.cpu_s, limits.cpu_s + 5),
            "RLIMIT_FSIZE": (limits.fsize_mb * mb, limits.fsize_mb * mb),
            "RLIMIT_NOFILE": (limits.nofile, limits.nofile), "RLIMIT_CORE": (0, 0)}


def _limit_resources(limits: Limits, group: "cgroup.WorkerCgroup | None" = None) -> None:  # between fork and exec
    die_with_parent()  # unshare --kill-child then takes the worker down with it
    if group is not None:  # before exec: everything the worker ever starts is inside its cgroup's limits
        group.join()
    for name, pair in rlimits(limits).items():
        resource.setrlimit(getattr(resource, name), pair)


def _exchange():
    """A memfd for the worker's input exchange (harness/sandbox/exchange.py), passed down as a descriptor."""
    from harness.sandbox.exchange import Exchange

    return Exchange.optional(Exchange.memfd)


class _CgroupMeter:
    """A local worker's memory as the host reads it: the counters of the worker's own cgroup (cold or forked)."""

    cgroup = None

    def memory_meter(self):
        if getattr(self, "_meter", None) is None and self.cgroup is not None:
            from harness.sandbox import memory_meter

            group = self.cgroup
            directory = group.dirs.get("memory") or (group.dirs.get("unified") if group.sup.memory else None)
            self._meter = memory_meter.for_directory(directory, group.sup.version)
        return getattr(self, "_meter", None)

    def memory_meter_reason(self) -> str:
        if self.cgroup is None:
            sup = cgroup.support()
            why = sup.reason if sup.version is None else "it was started without one"
            return f"the local worker has no cgroup of its own ({why})"
        if not self.cgroup.sup.memory:
            return f"the local worker's cgroup has no memory controller ({self.cgroup.sup.reason})"
        return "the local worker's cgroup memory counters cannot be read"


class LocalHandle(_CgroupMeter, WorkerHandle):
    def __init__(self, proc: subprocess.Popen, workdir: str, group: "cgroup.WorkerCgroup | None" = None):
        self.proc = proc
        self.workdir = workdir
        self.cgroup = group

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup is not None:  # whatever left the process group (setsid) is still in the cgroup
            self.cgroup.kill(wait=False)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait on anything
            pass

    def post_mortem(self) -> dict:
        info = super().post_mortem()
        code = info.get("exit_code")
        if code is not None and code > 128 and self.namespaced:
            info["signal"] = code - 128  # unshare --fork reports the child's signal as 128+n
        if self.cgroup is not None:  # an OOM kill by the memory cgroup: oom_killed (status memory)
            info.update(self.cgroup.evidence())
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
        if self.cgroup is not None:  # killed now, removed once empty (in the background; a leftover is swept)
            cgroup.retire(self.cgroup)
            self.cgroup = None
        self.close_exchange()
        shutil.rmtree(self.workdir, ignore_errors=True)


def reachable_docker_socket() -> str | None:
    """A Docker engine socket this process could talk to (whoever reaches it is root on the engine's host)."""
    import stat

    host = os.environ.get("DOCKER_HOST", "")
    paths = [host[len("unix://"):]] if host.startswith("unix://") else []
    for path in [*paths, "/var/run/docker.sock", "/run/docker.sock"]:
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode) and os.access(path, os.R_OK | os.W_OK):
                return path
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def _sweep_scratch() -> None:
    """Once per process: remove scratch left by graders that were killed outright (harness/core/leftovers.py)."""
    from harness.core.leftovers import sweep_scratch

    sweep_scratch()


class LocalSandbox(Sandbox):
    name = "local"

    def start(self, *, track: str, entry: str, submission: Path, limits: Limits) -> WorkerHandle:
        if not mount_isolation() and os.path.exists("/.dockerenv") and reachable_docker_socket():
            from harness.core.errors import InfrastructureError

            raise InfrastructureError(  # e.g. the grader container of docker-compose.yml, which mounts the socket
                f"refusing to run a submission in a local process inside a container that can reach the Docker "
                f"socket {reachable_docker_socket()} (that would hand it the host); grade with --sandbox docker")
        _sweep_scratch()
        workdir = tempfile.mkdtemp(prefix=scratch_prefix())
        os.chmod(workdir, 0o700)
        worker_dir = os.path.join(workdir, ".worker")
        os.mkdir(worker_dir)
        bytecode.copy_scripts(WORKER_DIR, WORKER_FILES, worker_dir)  # each with its .pyc: no compiling at start
        shutil.copyfile(submission, os.path.join(workdir, "submission.py"))
        prefix = namespace_prefix()
        exchange = group = None
        joins: list[int] = []
        try:
            exchange = _exchange()
            extra = ["--exchange-fd", str(exchange.fd)] if exchange else []
            group = _new_cgroup(limits)
            vfork = mount_isolation() and _setpriv() is not None
            if mount_isolation():  # the worker runs from a copy on its own tmpfs (at /tmp when it may cover it)
                box = os.path.join(workdir, "box")
                os.mkdir(box)
                cover = cover_tmp()
                root = "/tmp" if cover else box
                hidden = [d for d in hidden_paths() if cover or not _inside(os.path.realpath(workdir), d)]
                setup = {}
                if vfork:  # mount_setup.py joins the cgroup and sets the rlimits, first thing
                    joins = group.open_procs() if group is not None else []
                    setup = {"join": joins, "rlimits": rlimits(limits)}
                command = self._command(root, track, entry) + extra
                # the worker's script runs in the set-up's own interpreter: one interpreter's start, not two
                in_place = command[:4] == [sys.executable, *WORKER_FLAGS]
                cmd = _mount_command(prefix, box, int(limits.tmpfs_mb), cover, hidden,
                                     command[4:] if in_place else command, in_place=in_place, **setup)
                if vfork:
                    cmd = [_setpriv(), "--pdeathsig", "KILL", "--", *cmd]
            else:
                root = workdir
                cmd = [*prefix, *self._command(root, track, entry), *extra]
            home = os.path.join(root, "home")  # cwd, HOME and TMPDIR of the worker
            if root == workdir:
                os.mkdir(home, 0o700)
            limit = None if vfork else functools.partial(_limit_resources, limits, group)
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=workdir if root != workdir else home,
                                    env=scrubbed_env(home, limits.metered_memory, track),
                                    start_new_session=True, preexec_fn=limit, close_fds=True,
                                    pass_fds=((exchange.fd,) if exchange else ()) + tuple(joins))
        except BaseException:
            if group is not None:
                group.remove()
            if exchange:
                exchange.close()
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            for fd in joins:  # the worker's set-up holds its own copies
                os.close(fd)
        handle = LocalHandle(proc, workdir, group)
        handle.exchange = exchange
        handle.namespaced = bool(prefix)
        return handle

    @staticmethod
    def _command(root: str, track: str, entry: str) -> list[str]:
        return [sys.executable, *WORKER_FLAGS, os.path.join(root, ".worker", "worker.py"), "--track", track,
                "--entry", entry, "--site-dirs", json.dumps(site_dirs()), os.path.join(root, "submission.py")]

    def describe(self) -> dict:
        return {"sandbox": self.name, "namespaces": bool(namespace_prefix()),
                "read_only_fs": mount_isolation(), "cgroup": cgroup.support().describe()}


def doctor_checks() -> list:
    """`grade sandbox doctor`'s lines for the local backend: whether its process and memory limits bind."""
    from harness.sandbox.base import DoctorCheck

    return [DoctorCheck(*c) for c in cgroup.doctor_checks()]


def _new_cgroup(limits: Limits) -> "cgroup.WorkerCgroup | None":
    """The worker's own cgroup (pids, memory), or None where cgroups are unavailable (see cgroup.support)."""
    from harness.core.errors import InfrastructureError

    try:
        return cgroup.create(limits)
    except OSError as exc:
        raise InfrastructureError(f"could not make the local worker's cgroup: {exc}") from exc


# -- the zygote: warm workers forked from a process that has done the imports -------------------------------
ZYGOTE_FILES = ("zygote.py",)   # beside the worker files in the zygote's box (never in the Docker image)
ZYGOTE_START_TIMEOUT_S = 120.0  # imports + warm-up of a zygote (torch) on a loaded machine
SPAWN_TIMEOUT_S = 10.0          # the zygote's answer to a spawn request


class ForkedProc:
    """What :class:`~harness.session.channel.WorkerSession` needs of a ``Popen`` for a worker forked by a zygote:
    the host's ends of its three pipes, and its exit status as the zygote reports it."""

    pid = None  # the worker is not the host's child: it is killed and reaped through its zygote

    def __init__(self, zygote: "Zygote", ident: int, stdin_fd: int, stdout_fd: int, stderr_fd: int):
        self.zygote, self.ident = zygote, ident
        self.stdin = os.fdopen(stdin_fd, "wb", buffering=0)
        self.stdout = os.fdopen(stdout_fd, "rb")
        self.stderr = os.fdopen(stderr_fd, "rb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.zygote.wait_exit(self, timeout):
            raise subprocess.TimeoutExpired("zygote worker", timeout)
        return self.returncode

    def kill(self) -> None:
        self.zygote.kill(self)

    terminate = kill


class ZygoteHandle(_CgroupMeter, WorkerHandle):
    """A single-use warm worker forked by a :class:`Zygote`."""

    namespaced = True
    warm = True

    def __init__(self, proc: ForkedProc, group: "cgroup.WorkerCgroup | None" = None):
        self.proc = proc
        self.cgroup = group

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            if self.cgroup is not None:
                self.cgroup.kill(wait=False)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - the zygote died with it (see Zygote)
                pass

    def post_mortem(self) -> dict:
        info = super().post_mortem()
        code = info.get("exit_code")
        if code is not None and code > 128:
            info["signal"] = code - 128  # like unshare --fork: the worker's signal as 128+n
        info["warm"] = True
        if self.cgroup is not None:
            info.update(self.cgroup.evidence())
        return info

    def cleanup(self) -> None:
        if self.proc.returncode is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if self.cgroup is not None:
            cgroup.retire(self.cgroup)
            self.cgroup = None
        self.close_exchange()


class Zygote:
    """A process, in the local sandbox's namespaces (read-only root, the grader hidden, no network), that has
    imported NumPy (and torch for the torch track), the worker and nothing of any candidate; it forks one
    single-use worker per :meth:`spawn` (see harness/worker/zygote.py for what each child does before it is
    handed out). Raises :class:`InfrastructureError` when it cannot start."""

    def __init__(self, track: str, *, connection: int | None = None, wait: bool = True):
        """``connection``: attach to a zygote another process owns (a batch parent's), through a control
        connection it made with :meth:`connect` and passed down; ``wait=False``: do not wait for it to be up (its
        first answer then takes longer)."""
        import socket

        from harness.core.errors import InfrastructureError

        self.track = track
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._next = 0
        self._answers: dict[int, dict] = {}
        self._procs: dict[int, ForkedProc] = {}
        self.dead = False
        self._stderr = bytearray()
        self.spawn_timeout_s = SPAWN_TIMEOUT_S if wait else ZYGOTE_START_TIMEOUT_S
        if connection is not None:
            self.proc = None
            self.workdir = None
            self.sock = socket.socket(fileno=connection)
            self.spawn_timeout_s = ZYGOTE_START_TIMEOUT_S  # it may still be importing torch
            threading.Thread(target=self._read, daemon=True, name=f"zygote-{track}").start()
            return
        if not mount_isolation():
            raise InfrastructureError("the local zygote needs the mount-namespace isolation (unshare), "
                                      "which this machine does not allow")
        _sweep_scratch()
        self.workdir = tempfile.mkdtemp(prefix=scratch_prefix())
        os.chmod(self.workdir, 0o700)
        worker_dir = os.path.join(self.workdir, ".worker")
        os.mkdir(worker_dir)
        bytecode.copy_scripts(WORKER_DIR, (*WORKER_FILES, *ZYGOTE_FILES), worker_dir)
        box = os.path.join(self.workdir, "box")
        os.mkdir(box)
        cover = cover_tmp()
        root = "/tmp" if cover else box
        self.hidden_from = hidden_paths()  # what its namespace hides: stale() once a new folder appears
        hidden = [d for d in self.hidden_from if cover or not _inside(os.path.realpath(self.workdir), d)]
        keep = [k for k in keeps(cover, hidden) if _inside(k, root)]
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = host_end
        command = [sys.executable, *WORKER_FLAGS, os.path.join(root, ".worker", "zygote.py"), "--track", track,
                   "--control-fd", str(zygote_end.fileno()), "--root", root, "--keep", json.dumps(keep),
                   "--site-dirs", json.dumps(site_dirs())]
        cmd = _mount_command(namespace_prefix(), box, 8, cover, hidden, command)
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, cwd=self.workdir,
                                         env=scrubbed_env(os.path.join(root, "home")), start_new_session=True,
                                         preexec_fn=_zygote_limits, pass_fds=(zygote_end.fileno(),))
        except OSError as exc:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise InfrastructureError(f"could not start the local zygote: {exc}") from exc
        finally:
            zygote_end.close()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._read, daemon=True, name=f"zygote-{track}").start()
        self.threads = None
        if wait:
            self.wait_up()

    def wait_up(self) -> None:
        """Wait for the zygote's imports and warm-up; InfrastructureError when it does not come up."""
        from harness.core.errors import InfrastructureError

        track = self.track
        with self._cond:
            self._cond.wait_for(lambda: self.dead or "up" in self._answers, ZYGOTE_START_TIMEOUT_S)
            up = self._answers.pop("up", None)
        if up is None:
            self.close()
            raise InfrastructureError(f"the local {track} zygote did not start: {self.stderr_tail() or 'no answer'}")
        self.threads = up.get("threads")

    # -- messages -----------------------------------------------------------------------------------------
    def _drain_stderr(self) -> None:
        try:
            for line in self.proc.stderr:
                self._stderr = (self._stderr + line)[-4000:]
        except (OSError, ValueError):
            pass

    def stderr_tail(self) -> str:
        from harness.core.text import clean_text

        return clean_text(self._stderr.decode("utf-8", "replace"), 500)

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            with self._cond:
                op = msg.get("op")
                if op == "up":
                    self._answers["up"] = msg
                elif op in ("spawned", "failed"):
                    self._answers[msg.get("id")] = msg
                elif op == "exit":
                    proc = self._procs.pop(msg.get("id"), None)
                    if proc is not None:
                        proc.returncode = int(msg.get("code", 70))
                self._cond.notify_all()
        with self._cond:  # the zygote is gone, and every worker it forked died with it (its PID namespace)
            self.dead = True
            for proc in self._procs.values():
                proc.returncode = 137
            self._procs.clear()
            self._cond.notify_all()

    def _send(self, msg: dict, fds=()) -> None:
        import socket

        socket.send_fds(self.sock, [json.dumps(msg).encode()], list(fds))

    # -- the API ------------------------------------------------------------------------------------------
    def alive(self) -> bool:
        return not self.dead and (self.proc is None or self.proc.poll() is None)

    def stale(self) -> bool:
        """Whether what its namespace hides is out of date (a top-level folder made since it started): its
        forks would see that folder (one removed since is no reason). An attached zygote (a batch's) is its
        owner's to judge."""
        return self.proc is not None and not set(hidden_paths()) <= set(getattr(self, "hidden_from", ()))

    def busy(self) -> bool:
        """Whether a worker it forked is still running (closing the zygote would kill it)."""
        with self._lock:
            return any(p.returncode is None for p in self._procs.values())

    def connect(self) -> int:
        """A new control connection to this zygote, as an inheritable descriptor for another process (which
        attaches with ``Zygote(track, connection=fd)``). Workers spawned through it die when it is closed."""
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                self._send({"op": "connect"}, [theirs.fileno()])
        finally:
            theirs.close()
        fd = ours.detach()
        os.set_inheritable(fd, True)
        return fd

    def spawn(self, limits: Limits) -> ZygoteHandle:
        """Fork a warm worker with ``limits``; it answers ``idle`` on its stdout once it is set up."""
        from harness.core.errors import InfrastructureError

        group = _new_cgroup(limits)  # made here, joined by the forked child before anything else it does
        try:
            joins = group.open_procs() if group is not None else []
        except OSError as exc:
            group.remove()
            raise InfrastructureError(f"could not open the warm worker's cgroup: {exc}") from exc
        pipes = [os.pipe() for _ in range(3)]
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        exchange = _exchange()  # a 4th descriptor: the worker's input exchange (the host keeps its own)
        spec = {k: int(getattr(limits, k)) for k in ("memory_mb", "cpu_s", "fsize_mb", "nofile", "tmpfs_mb")}
        spec["metered_memory"] = bool(limits.metered_memory)
        with self._cond:
            self._next += 1
            ident = self._next
        try:
            with self._lock:
                if self.dead:
                    raise OSError("the zygote is gone")
                self._send({"op": "spawn", "id": ident, "limits": spec, "cgroup_fds": len(joins),
                            "exchange": bool(exchange)}, theirs + ([exchange.fd] if exchange else []) + joins)
        except OSError as exc:
            for fd in ours:
                os.close(fd)
            if group is not None:
                group.remove()
            if exchange:
                exchange.close()
            raise InfrastructureError(f"the local zygote is not answering: {exc}") from exc
        finally:
            for fd in theirs + joins:
                os.close(fd)
        proc = ForkedProc(self, ident, *ours)
        with self._cond:
            self._procs[ident] = proc
            self._cond.wait_for(lambda: self.dead or ident in self._answers, self.spawn_timeout_s)
            answer = self._answers.pop(ident, None)
            if answer is None or answer.get("op") != "spawned":
                self._procs.pop(ident, None)
                proc.returncode = 70
        handle = ZygoteHandle(proc, group)
        handle.exchange = exchange
        if proc.returncode is not None:
            handle.cleanup()
            why = (answer or {}).get("message") or ("the zygote died" if self.dead else "no answer")
            raise InfrastructureError(f"the local zygote could not fork a worker: {why}")
        return handle

    def kill(self, proc: ForkedProc) -> None:
        try:
            with self._lock:
                if proc.returncode is None and not self.dead:
                    self._send({"op": "kill", "id": proc.ident})
        except OSError:
            pass

    def wait_exit(self, proc: ForkedProc, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: proc.returncode is not None, timeout)

    def close(self) -> None:
        """Stop the zygote and, with it, every worker it forked (they live in its PID namespace). Attached to
        another process's zygote: close the connection (the workers spawned through it are killed)."""
        import socket

        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes our reader; the zygote sees the end at once
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        try:
            self.proc.stderr.close()
        except OSError:  # pragma: no cover
            pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def _zygote_limits() -> None:  # the zygote's own limits, between fork and exec; its workers set theirs
    die_with_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
