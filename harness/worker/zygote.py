"""The local backend's zygote: a process that has imported NumPy (and torch), the worker and nothing of any
candidate, and forks one single-use warm worker per request. Stand-alone (standard library, NumPy, torch and
its siblings worker.py + wire.py); it runs inside the local sandbox, in the mount, PID and network namespaces
``mount_setup.py`` made for it (everything read-only, the grader hidden), and never reads a candidate's file.

    python -I -B zygote.py --track numpy|torch|python --control-fd N --root DIR

The host talks to it over a SOCK_SEQPACKET socket (fd N), one JSON message per packet:

    zygote -> host  {"op": "up", "threads": n}                       imports and warm-up done
    host -> zygote  {"op": "spawn", "id": i, "limits": {...}, "cgroup_fds": k}  + 3 + k fds (SCM_RIGHTS): the
                                      child's stdin, stdout, stderr, then the cgroup.procs files of its own cgroup
                                      (k = 0 where the host has no cgroups)
    zygote -> host  {"op": "spawned", "id": i} | {"op": "failed", "id": i, "message": ...}
    host -> zygote  {"op": "kill", "id": i}
    host -> zygote  {"op": "connect"} + 1 fd: one more control connection (another grading process of the same
                                      batch shares this zygote); when it closes, the workers spawned through
                                      it are killed; when the first one closes, the zygote exits
    zygote -> host  {"op": "exit", "id": i, "code": c}                c as ``unshare --fork`` reports it (128+n
                                                                      for a signal)

Each request forks G straight into a new PID namespace, as its pid 1 (the zygote unshares the PID namespace
for that one fork and goes back to its own for the next: its own namespaces never change, and when G exits
everything left in G's namespace dies). G first joins its own cgroup (pids and memory limits; it writes "0" to
each cgroup.procs descriptor), takes the three fds as 0, 1, 2 and unshares fresh mount, network, IPC and UTS
namespaces; it makes the mounts private, replaces ``--root`` (the zygote's /tmp) with a fresh size-capped tmpfs
of its own (the interpreter's folders that lived there are bound back read-only), mounts a private /proc, closes
every other descriptor and forks W, the worker (pid 2), then only reaps and exits with W's status. W, before it
touches anything of a candidate: resets its environment, sets its rlimits, drops every capability (and, as real
root, its uid to nobody), sets no-new-privileges and reseeds every random generator. Then it is a warm worker
(``Worker.serve_warm``): ``idle``, a ``load`` request, ``boot``, the candidate. G and W each die with their
parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import resource
import select
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import worker  # noqa: E402  (sibling module; imports NumPy and wire)

del sys.path[0]

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, \
    0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, \
    1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
NOBODY = 65534
EXCHANGE_FD = 3  # the worker's input exchange (a memfd from the host), when the spawn request carries a 4th fd
MAX_MSG = 65536
MAX_FDS = 8  # a spawn's stdin, stdout, stderr, input exchange and its cgroup.procs files (one per v1 hierarchy)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source, target, fstype, flags, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def die_with_parent(parent: int | None = None, alive: int | None = None) -> None:
    """SIGKILL when the parent dies; exit now if it already has (``parent``: its pid as seen from here;
    ``alive``: the read end of a pipe whose only writer is the parent, for a parent outside our PID namespace)."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if parent is not None and os.getppid() != parent:
        os._exit(137)
    if alive is not None:
        poller = select.poll()
        poller.register(alive, select.POLLIN | select.POLLHUP)
        if poller.poll(0):
            os._exit(137)


# -- the child: isolation, then a warm worker ---------------------------------------------------------------
def _fresh_root(root: str, keep: list, size_mb: int) -> None:
    """A new private tmpfs at ``root``; the interpreter's folders that lived inside it are bound back read-only."""
    held = []
    for path in keep:
        try:
            held.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
        except OSError:
            continue
    mount("grader-tmp", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size_mb)}m,mode=0755")
    for path, fd in held:
        os.makedirs(path, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        mount("none", path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)


def _malloc_settings(metered: bool, track: str) -> bool:
    """A child's malloc, as harness/sandbox/base.py's malloc_env sets a cold worker's: the zygote's own thresholds
    (its environment: REUSING_MALLOC) unless metered, when the NumPy track's worker hands what malloc holds free
    back before every answer (returns True: worker.Worker.trim) and the torch track's keeps METERED_MALLOC's."""
    if not metered:
        return False
    if track != "torch":
        return True
    if _libc.mallopt(M_MMAP_THRESHOLD, 128 << 10) != 1 or _libc.mallopt(M_TRIM_THRESHOLD, 128 << 10) != 1:
        raise OSError(errno.EINVAL, "mallopt refused the metered worker's malloc thresholds")
    _libc.malloc_trim(0)  # what the zygote's heap had free goes back now
    return False


def _limit(limits: dict) -> None:
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["nofile"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _world_readable(paths) -> bool:
    """Whether nobody could still read the interpreter and its packages (every folder up to / traversable)."""
    for path in paths:
        path = os.path.realpath(path)
        while True:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return False
            if not mode & 0o005:
                return False
            if path == "/":
                break
            path = os.path.dirname(path)
    return True


def _uid_mapped(uid: int) -> bool:
    try:
        with open("/proc/self/uid_map") as f:
            for line in f:
                inside, _, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return True
    except (OSError, ValueError):
        pass
    return False


def _drop_privileges(home: str, readable: bool) -> None:
    """As real root (and when nobody can read the interpreter): become nobody. Always: no capabilities, none
    regainable (bounding set emptied, no-new-privileges)."""
    if os.getuid() == 0 and readable and _uid_mapped(NOBODY):
        for path in (os.path.dirname(home), home):
            os.chown(path, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)  # a uid change from 0 clears the capability sets
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    _check(_libc.capset(header, data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")


def _reset_environment(home: str) -> None:
    import tempfile

    for key in ("HOME", "TMPDIR"):
        os.environ[key] = home
    tempfile.tempdir = None  # gettempdir() caches the zygote's answer


def _isolate(opts, spec: dict) -> None:
    """G's set-up once it has its namespaces: the mounts, then W, and a minimal init that reaps and exits with
    the worker's status (so the worker is an ordinary process: it can signal, and kill, itself)."""
    root = opts.root
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    _fresh_root(root, opts.keep, spec["limits"]["tmpfs_mb"])
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    home = os.path.join(root, "home")
    os.mkdir(home, 0o700)
    os.chdir(home)
    os.closerange(3 if opts.exchange_fd is None else EXCHANGE_FD + 1, 1 << 16)
    pid = os.fork()
    if pid == 0:
        try:
            _worker(opts, spec, home)
        except BaseException as exc:  # before the candidate: a death before boot, the grader's fault
            try:
                os.write(2, f"warm worker set-up failed: {type(exc).__name__}: {exc}\n".encode()[:2000])
            except OSError:
                pass
            os._exit(70)
        os._exit(0)
    _init(pid)


def _init(worker_pid: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):  # only the worker holds the pipes
        os.dup2(null, target)
    os.close(null)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)  # reaps orphans too (a daemon the candidate left)
        except ChildProcessError:
            os._exit(70)
        except InterruptedError:
            continue
        if pid == worker_pid:  # our exit ends the namespace: the kernel kills whatever is left in it
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _worker(opts, spec: dict, home: str) -> None:
    die_with_parent(parent=1)
    _reset_environment(home)
    _limit(spec["limits"])
    _drop_privileges(home, opts.readable)
    worker.reseed()
    os.umask(0o077)
    w = worker.Worker(opts.track, "", "", worker.protocol_stdout())
    w.trim = _malloc_settings(bool(spec["limits"].get("metered_memory", True)), opts.track)
    w.open_exchange(None, opts.exchange_fd)
    w.serve_warm(opts.root)


def _join_cgroup(fds: list) -> None:
    """Enter the worker's own cgroup (pids and memory limits) through the host's descriptors of its
    ``cgroup.procs`` files ("0": the writing process); everything C forks from here on is inside it."""
    for fd in fds:
        os.write(fd, b"0")


def _child(opts, spec: dict, fds: list, alive: int, held: int) -> None:
    """G, pid 1 of its new PID namespace: die with the zygote, join the worker's cgroup, take the fds as 0, 1, 2,
    unshare the other namespaces, then :func:`_isolate` (W, and G's life as its init). ``alive``/``held``: the
    zygote's pipe whose only writer is the zygote (``held``, closed here), for a parent outside our namespace."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    os.close(held)
    die_with_parent(alive=alive)
    n_joins = int(spec.get("cgroup_fds") or 0)
    fds, joins = fds[:len(fds) - n_joins], fds[len(fds) - n_joins:]
    try:
        _join_cgroup(joins)
    except OSError as exc:  # the host asked for limits that cannot be had: no worker (a grader fault)
        os.write(fds[2], f"warm worker set-up failed: cannot join its cgroup: {exc}\n".encode()[:2000])
        os._exit(70)
    for target, fd in enumerate(fds):  # 0, 1, 2 and, when the host sent one, 3: the input exchange
        os.dup2(fd, target)
    os.closerange(len(fds), 1 << 16)
    opts.exchange_fd = EXCHANGE_FD if len(fds) > EXCHANGE_FD else None
    try:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        _isolate(opts, spec)
    except BaseException as exc:  # before the candidate: the host sees a death before boot (a grader fault)
        try:
            os.write(2, f"warm worker set-up failed: {type(exc).__name__}: {exc}\n".encode()[:2000])
        except OSError:
            pass
        os._exit(70)
    os._exit(0)


def _fork_into_pid_namespace(own: int) -> int:
    """``os.fork()``, the child pid 1 of a new PID namespace; this process goes back to its own (``own``: a
    descriptor of it) for its next children. A zygote that could not go back exits: its next fork would put a
    worker in the namespace of the last one (the host starts a new zygote)."""
    _check(_libc.unshare(CLONE_NEWPID), "unshare(pid)")
    pid = None   # a fork that fails leaves the zygote to go back too
    try:
        pid = os.fork()
    finally:
        if pid != 0 and _libc.setns(own, CLONE_NEWPID) != 0:
            os.write(2, f"zygote: cannot return to its PID namespace: {os.strerror(ctypes.get_errno())}\n".encode())
            os._exit(70)
    return pid


# -- the zygote's loop --------------------------------------------------------------------------------------
def _send(sock: socket.socket, msg: dict) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        os._exit(0)  # the host is gone


def serve(opts) -> None:
    primary = socket.socket(fileno=opts.control_fd)
    conns = {primary.fileno(): primary}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, tuple] = {}  # pid -> (connection, request id)
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    alive, held = os.pipe()  # G's check that the zygote still lives: only the zygote keeps ``held`` open
    _send(primary, {"op": "up", "threads": len(os.listdir("/proc/self/task"))})
    poller = select.poll()
    poller.register(primary.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)

    def drop(conn: socket.socket) -> None:
        poller.unregister(conn.fileno())
        del conns[conn.fileno()]
        for pid, (owner, _) in list(children.items()):
            if owner is conn:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        conn.close()

    while True:
        for fd, ev in poller.poll(1000):
            if fd == wake_r:
                os.read(wake_r, 4096)
                continue
            conn = conns.get(fd)
            if conn is None:
                continue
            try:
                data, fds, _, _ = socket.recv_fds(conn, MAX_MSG, MAX_FDS)
            except InterruptedError:
                continue
            except OSError:
                data, fds = b"", []
            if not data:
                if conn is primary:
                    os._exit(0)  # the host closed the control socket: we are done
                drop(conn)
                continue
            msg = json.loads(data)
            op = msg.get("op")
            # stdin, stdout, stderr (+ the input exchange) + the cgroup.procs files of its cgroup
            if op == "spawn" and len(fds) == 3 + bool(msg.get("exchange")) + int(msg.get("cgroup_fds") or 0):
                try:
                    pid = _fork_into_pid_namespace(own_pid_ns)
                except OSError as exc:
                    _reply(conn, {"op": "failed", "id": msg.get("id"), "message": str(exc)})
                    pid = None
                if pid == 0:
                    try:
                        _child(opts, msg, fds, alive, held)
                    finally:
                        os._exit(70)
                if pid:
                    children[pid] = (conn, msg["id"])
                    _reply(conn, {"op": "spawned", "id": msg["id"]})
            elif op == "connect" and len(fds) == 1:
                extra = socket.socket(fileno=fds.pop())
                conns[extra.fileno()] = extra
                poller.register(extra.fileno(), select.POLLIN)
            elif op == "kill":
                for pid, (owner, ident) in children.items():
                    if owner is conn and ident == msg.get("id"):
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            elif op == "spawn":
                _reply(conn, {"op": "failed", "id": msg.get("id"), "message": "expected 3 descriptors (+ cgroup's)"})
            for fd_ in fds:
                os.close(fd_)
        while True:  # reap: G's exit status is the worker's
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            if pid in children:
                conn, ident = children.pop(pid)
                if conn.fileno() in conns:
                    _reply(conn, {"op": "exit", "id": ident, "code": code})


def _reply(conn: socket.socket, msg: dict) -> None:
    """To a secondary connection whose grading process is gone: nothing (it is dropped when its EOF is read)."""
    try:
        conn.send(json.dumps(msg).encode())
    except OSError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--track", choices=worker.wire.TRACKS, required=True)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--root", required=True, help="the folder each worker gets as its own fresh tmpfs")
    parser.add_argument("--keep", default="[]", help="JSON list: folders inside --root to bind back")
    parser.add_argument("--site-dirs", help="JSON list: the folders site would add (started with -S, see worker.py)")
    opts = parser.parse_args()
    opts.keep = json.loads(opts.keep)
    worker.warm_up(opts.track)
    opts.readable = _world_readable([p for p in (sys.prefix, sys.base_prefix, *sys.path) if os.path.isdir(p)])
    serve(opts)


if __name__ == "__main__":
    main()
