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
from pathlib import Path

from harness.core.process import die_with_parent
from harness.sandbox.base import WORKER_DIR, WORKER_FILES, Limits, Sandbox, WorkerHandle

KEEP_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LD_LIBRARY_PATH")
GRADER_PACKAGES = ("harness", "graders", "reference", "exercises")
# Top-level folders an interpreter needs; with a mount namespace every other top-level folder is covered.
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys", "tmp", "nix")
SENSITIVE = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
             "/etc/ssh")

# Stand-alone scripts run by the local backend: the mount-namespace set-up before the worker, and its probe.
MOUNT_SETUP = Path(__file__).resolve().parent / "mount_setup.py"
MOUNT_PROBE = Path(__file__).resolve().parent / "mount_probe.py"


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


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=1)
def _needed() -> tuple[str, ...]:
    """Folders the worker needs to see: the interpreter, its libraries, site-packages, NumPy, torch."""
    import importlib.util
    import site

    keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    keep.update(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)
    try:
        keep.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    for mod in ("numpy", "torch"):
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec and spec.origin:  # the whole site folder: wheels keep libraries beside the package (numpy.libs)
            keep.add(os.path.dirname(os.path.dirname(spec.origin)))
    return tuple(sorted({os.path.realpath(p) for p in keep if p}))


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
def hidden_paths() -> tuple[str, ...]:
    """What the worker must not see (when a mount namespace is available): every top-level folder but the
    system ones, the grader's own packages and a source checkout holding them wherever they are, and a few
    credential files. A hidden folder that holds something in :func:`_needed` is covered all the same, and the
    needed folders are mounted back inside it (:func:`keeps`); /tmp is replaced, not hidden."""
    import importlib.util

    found: set[str] = set()
    try:
        top = os.listdir("/")
    except OSError:
        top = []
    for name in top:
        path = os.path.join("/", name)
        if name not in SYSTEM_DIRS and os.path.isdir(path) and not os.path.islink(path):
            found.add(path)
    packages = set()
    for name in GRADER_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec else []:
            if os.path.isdir(loc):
                packages.add(os.path.realpath(loc))
    found |= packages
    for parent in {os.path.dirname(d) for d in packages}:
        if any(os.path.exists(os.path.join(parent, m)) for m in ("pyproject.toml", "setup.py", ".git")):
            found.add(parent)
    found.update(p for p in SENSITIVE if os.path.exists(p))
    tmp = os.path.realpath("/tmp")
    found = {d for d in found if d != "/" and not _inside(tmp, d)}
    return tuple(sorted(d for d in found if not any(o != d and _inside(d, o) for o in found)))


def _mount_command(prefix: tuple[str, ...], box: str, size_mb: int, cover: bool, hidden,
                   command: list[str]) -> list[str]:
    spec = {"box": box, "size_mb": int(size_mb), "cover": cover, "keep": keeps(cover, hidden), "hidden": list(hidden)}
    return [prefix[0], "--mount", "--mount-proc", *prefix[1:], sys.executable, "-I", "-S", "-B", str(MOUNT_SETUP),
            json.dumps(spec), *command]


def _probe_cache() -> Path | None:
    """Where the mount probe's verdict is remembered for this boot, user, interpreter and harness version."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    from harness import __version__

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attn-grader"
    import hashlib

    scripts = MOUNT_SETUP.read_text() + MOUNT_PROBE.read_text()
    digest = hashlib.sha256("\0".join((sys.executable, __version__, scripts)).encode()).hexdigest()
    key = f"{boot}-{os.getuid()}-{digest[:16]}"
    return base / f"mount-probe-{key}"


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
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text("ok" if ok else "no")
        except OSError:
            pass
    return ok


def _run_mount_probe(prefix: tuple[str, ...]) -> bool:
    probe = tempfile.mkdtemp(prefix="grade-probe-")
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


def scrubbed_env(home: str) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    env.update({k: os.environ[k] for k in KEEP_ENV if k in os.environ})
    return env


def _limit_resources(limits: Limits) -> None:  # runs in the child between fork and exec
    die_with_parent()  # unshare --kill-child then takes the worker down with it
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
    """Once per process: remove scratch folders (grade-<pid>-*) left by graders that were killed outright."""
    root = Path(tempfile.gettempdir())
    for folder in root.glob("grade-*-*"):
        pid = folder.name.split("-")[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its grader is still running
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


class LocalSandbox(Sandbox):
    name = "local"

    def start(self, *, track: str, entry: str, submission: Path, limits: Limits) -> WorkerHandle:
        if not mount_isolation() and os.path.exists("/.dockerenv") and reachable_docker_socket():
            from harness.core.errors import InfrastructureError

            raise InfrastructureError(  # e.g. the grader container of docker-compose.yml, which mounts the socket
                f"refusing to run a submission in a local process inside a container that can reach the Docker "
                f"socket {reachable_docker_socket()} (that would hand it the host); grade with --sandbox docker")
        _sweep_scratch()
        workdir = tempfile.mkdtemp(prefix=f"grade-{os.getpid()}-")
        os.chmod(workdir, 0o700)
        worker_dir = os.path.join(workdir, ".worker")
        os.mkdir(worker_dir)
        for name in WORKER_FILES:
            shutil.copyfile(WORKER_DIR / name, os.path.join(worker_dir, name))
        shutil.copyfile(submission, os.path.join(workdir, "submission.py"))
        prefix = namespace_prefix()
        if mount_isolation():  # the worker runs from a copy on its own tmpfs (at /tmp when it may cover it)
            box = os.path.join(workdir, "box")
            os.mkdir(box)
            cover = cover_tmp()
            root = "/tmp" if cover else box
            hidden = [d for d in hidden_paths() if cover or not _inside(os.path.realpath(workdir), d)]
            cmd = _mount_command(prefix, box, int(limits.tmpfs_mb), cover, hidden, self._command(root, track, entry))
        else:
            root = workdir
            cmd = [*prefix, *self._command(root, track, entry)]
        home = os.path.join(root, "home")  # cwd, HOME and TMPDIR of the worker
        if root == workdir:
            os.mkdir(home, 0o700)
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=workdir if root != workdir else home, env=scrubbed_env(home),
                                start_new_session=True, preexec_fn=functools.partial(_limit_resources, limits),
                                close_fds=True)
        handle = LocalHandle(proc, workdir)
        handle.namespaced = bool(prefix)
        return handle

    @staticmethod
    def _command(root: str, track: str, entry: str) -> list[str]:
        return [sys.executable, "-I", "-B", os.path.join(root, ".worker", "worker.py"), "--track", track,
                "--entry", entry, os.path.join(root, "submission.py")]

    def describe(self) -> dict:
        return {"sandbox": self.name, "namespaces": bool(namespace_prefix()),
                "read_only_fs": mount_isolation()}
