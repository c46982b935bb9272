"""Set up the local worker's mount namespace, then exec the worker. Stand-alone: standard library only.

Runs as root of a new mount namespace (after ``unshare --mount``, before the worker):

    python -I -S -B mount_setup.py SPEC_JSON COMMAND...     SPEC = {"box", "size_mb", "cover", "keep", "hidden"}
                                                                    (+ "join", "rlimits" for a worker)

0. with ``join`` and ``rlimits`` (a local worker started without ``preexec_fn``), before anything else: "0" is
   written to each inherited descriptor of the worker's ``cgroup.procs`` files (this process, and all it will
   run, enters the worker's cgroup: its pids and memory limits, and the tmpfs pages below are charged there),
   then the rlimits are set;
1. a size-capped tmpfs at BOX gets a copy of the worker, the submission (none for the zygote) and an empty home;
2. the folders the interpreter needs that lie inside what is about to be covered (``keep``: a venv under /tmp,
   Python under /root, site-packages under /work...) are bind-mounted into the box, to be carried across;
3. with ``cover``, the box is moved onto /tmp (hiding all of the host's /tmp at once: other checkouts, sockets,
   other graders' scratch folders);
4. every ``hidden`` folder is covered by an empty tmpfs (a file by /dev/null; one that is gone is skipped);
5. the ``keep`` folders are moved back to their own paths, on top of the new /tmp or of the cover, which is then
   made read-only: nothing else of /tmp or of a hidden folder shows, and nothing depends on entries that other
   processes own (no check-then-mount race);
6. every other writable mount but the box and /proc is re-mounted read-only; the worker starts in BOX/home:
   COMMAND is executed, or, with ``in_place``, COMMAND[0] is a Python script run here (as runpy would, from the
   bytecode the host wrote beside it when it matches) with COMMAND as its argv, saving an interpreter's start (this
   interpreter was then started with the worker's flags).

A failure here kills the worker before its boot frame: the host retries it, then reports a grader fault.
"""

import ctypes
import errno
import json
import os
import resource
import sys

# mount(2) flags
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC = 1, 2, 4, 8, 32, 4096, 8192, 16384
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
KEEP_FLAGS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC, os.ST_NOATIME: MS_NOATIME,
              os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}
_libc = None


def mount(source, target, fstype, flags, data=None) -> None:
    global _libc
    _libc = _libc or ctypes.CDLL(None, use_errno=True)
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def unescape(field: str) -> str:
    """A mount point as /proc/self/mountinfo writes it (octal escapes for space, tab, newline, backslash)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_points() -> list:
    with open("/proc/self/mountinfo") as f:
        return [unescape(line.split()[4]) for line in f.read().splitlines()]


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def skipped(point: str, box: str) -> bool:
    """Mounts the read-only pass leaves alone: the box and /proc (what lies under a cover no longer resolves)."""
    return point in (box, "/proc") or point.startswith("/proc/")


def copy_file(src: str, dst: str) -> None:
    with open(src, "rb") as f, open(dst, "xb") as out:
        out.write(f.read())


def copy_folder(src: str, dst: str) -> None:
    """``shutil.copytree`` for the worker's few files, without shutil's import (~3 ms of a cold worker's start: it
    pulls in fnmatch, zlib, bz2 and lzma) in the interpreter that goes on to run the worker."""
    os.mkdir(dst)
    for name in os.listdir(src):
        source = os.path.join(src, name)
        (copy_folder if os.path.isdir(source) else copy_file)(source, os.path.join(dst, name))


def fill_box(box: str, size_mb: int) -> None:
    src = os.path.dirname(box)
    mount("grader-tmp", box, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=0755")
    copy_folder(os.path.join(src, ".worker"), os.path.join(box, ".worker"))
    if os.path.exists(os.path.join(src, "submission.py")):  # none for the zygote: its workers get it by pipe
        copy_file(os.path.join(src, "submission.py"), os.path.join(box, "submission.py"))
    os.mkdir(os.path.join(box, "home"), 0o700)


def stash_keeps(box: str, keep) -> None:
    for i, path in enumerate(keep):
        os.makedirs(os.path.join(box, ".keep", str(i)))
        mount(path, os.path.join(box, ".keep", str(i)), None, MS_BIND | MS_REC)


def hide(hidden, keep) -> list:
    """Cover each hidden path; return the covers that must take keep folders (left writable until then)."""
    open_covers = []
    for path in hidden:
        takes = any(inside(k, path) for k in keep)
        try:
            if os.path.isdir(path):
                flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | (0 if takes else MS_RDONLY)
                mount("grader-hidden", path, "tmpfs", flags, "size=64k,mode=0755")
                if takes:
                    open_covers.append(path)
            else:
                mount("/dev/null", path, None, MS_BIND)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # gone meanwhile: nothing left to hide
                raise
    return open_covers


def restore_keeps(box: str, keep, open_covers) -> None:
    stash = os.path.join(box, ".keep")
    for i, path in enumerate(keep):
        os.makedirs(path, exist_ok=True)
        mount(os.path.join(stash, str(i)), path, None, MS_MOVE)
        os.rmdir(os.path.join(stash, str(i)))
    if keep:
        os.rmdir(stash)
    for path in open_covers:
        mount("none", path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def read_only_elsewhere(box: str) -> None:
    for point in mount_points():
        if skipped(point, box):
            continue
        try:
            current = os.statvfs(point).f_flag
        except OSError:
            continue
        if current & os.ST_RDONLY:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for st, ms in KEEP_FLAGS.items():
            flags |= ms if current & st else 0
        try:
            mount("none", point, None, flags)
        except OSError:
            pass


def limit(spec) -> None:
    for fd in spec.get("join", []):  # the host's descriptors of the worker's cgroup.procs files: "0" is this process
        os.write(fd, b"0")
        os.close(fd)
    for name, (soft, hard) in spec.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def main(argv) -> None:
    spec, command = json.loads(argv[0]), argv[1:]
    limit(spec)
    box, keep, hidden = spec["box"], spec["keep"], spec["hidden"]
    fill_box(box, spec["size_mb"])
    stash_keeps(box, keep)
    if spec["cover"]:
        mount(box, "/tmp", None, MS_MOVE)
        box = "/tmp"
    open_covers = hide(hidden, keep)
    restore_keeps(box, keep, open_covers)
    read_only_elsewhere(box)
    os.chdir(os.path.join(box, "home"))
    if spec.get("in_place"):  # a script, run in this interpreter (started with the worker's own flags)
        run_script(command)
        return
    os.execv(command[0], command)


def script_code(path: str):
    """The code of the script at ``path``: the checked hash-based bytecode the host wrote beside it
    (``__pycache__``, harness/sandbox/bytecode.py) when it is this interpreter's and the source's hash matches,
    else compiled from the source."""
    import _frozen_importlib_external as bootstrap  # always loaded: importlib's own
    import _imp
    import marshal

    with open(path, "rb") as f:
        source = f.read()
    folder, name = os.path.split(path)
    pyc = os.path.join(folder, "__pycache__", f"{name.rsplit('.', 1)[0]}.{sys.implementation.cache_tag}.pyc")
    try:
        with open(pyc, "rb") as f:
            data = f.read()
    except OSError:
        data = b""
    if (data[:4] == bootstrap.MAGIC_NUMBER and data[4:8] == (0b11).to_bytes(4, "little")
            and data[8:16] == _imp.source_hash(bootstrap._RAW_MAGIC_NUMBER, source)):
        try:
            code = marshal.loads(memoryview(data)[16:])
        except (ValueError, EOFError, TypeError):
            pass
        else:
            _imp._fix_co_filename(code, path)
            return code
    return compile(source, path, "exec", dont_inherit=True)


def run_script(command) -> None:
    """Run the script ``command[0]`` as ``__main__`` with ``command`` as its argv, as ``runpy.run_path`` does, without
    runpy's and pkgutil's imports, and from its bytecode (:func:`script_code`)."""
    import types

    path = command[0]
    code = script_code(path)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    sys.argv = list(command)
    exec(code, module.__dict__)


if __name__ == "__main__":
    main(sys.argv[1:])
