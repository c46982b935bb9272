"""Set up the local worker's mount namespace, then exec the worker. Stand-alone: standard library only.

Runs as root of a new mount namespace (after ``unshare --mount``, before the worker):

    python -I -S -B mount_setup.py SPEC_JSON COMMAND...     SPEC = {"box", "size_mb", "cover", "keep", "hidden"}

1. a size-capped tmpfs at BOX gets a copy of the worker, the submission and an empty home;
2. with ``cover``, it is moved onto /tmp (hiding all of the host's /tmp at once: other checkouts, sockets, other
   graders' scratch folders); the folders under /tmp the interpreter needs (``keep``, e.g. a venv there) are
   bind-mounted into the box first and moved back to their own paths after, so nothing depends on entries that
   other processes own (no check-then-mount race);
3. every ``hidden`` folder is covered by an empty read-only tmpfs (a file by /dev/null); one that is gone is
   skipped;
4. every other writable mount but the box and /proc is re-mounted read-only; the worker starts in BOX/home.

A failure here kills the worker before its boot frame: the host retries it, then reports a grader fault.
"""

import ctypes
import errno
import json
import os
import shutil
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


def skipped(point: str, box: str, hidden) -> bool:
    """Mounts the read-only pass leaves alone: the box, /proc, and what is inside a hidden folder."""
    return (point in (box, "/proc") or point.startswith("/proc/")
            or any(point.startswith(h + "/") for h in hidden))


def fill_box(box: str, size_mb: int) -> None:
    src = os.path.dirname(box)
    mount("grader-tmp", box, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=0755")
    shutil.copytree(os.path.join(src, ".worker"), os.path.join(box, ".worker"))
    shutil.copyfile(os.path.join(src, "submission.py"), os.path.join(box, "submission.py"))
    os.mkdir(os.path.join(box, "home"), 0o700)


def cover_tmp(box: str, keep) -> str:
    """Move the box onto /tmp, carrying the ``keep`` folders across; return the box's new path."""
    stash = os.path.join(box, ".keep")
    for i, path in enumerate(keep):
        os.makedirs(os.path.join(stash, str(i)))
        mount(path, os.path.join(stash, str(i)), None, MS_BIND | MS_REC)
    mount(box, "/tmp", None, MS_MOVE)
    stash = "/tmp/.keep"
    for i, path in enumerate(keep):
        os.makedirs(path, exist_ok=True)
        mount(os.path.join(stash, str(i)), path, None, MS_MOVE)
        os.rmdir(os.path.join(stash, str(i)))
    if keep:
        os.rmdir(stash)
    return "/tmp"


def hide(hidden) -> None:
    for path in hidden:
        try:
            if os.path.isdir(path):
                mount("grader-hidden", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
            else:
                mount("/dev/null", path, None, MS_BIND)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # gone meanwhile: nothing left to hide
                raise


def read_only_elsewhere(box: str, hidden) -> None:
    for point in mount_points():
        if skipped(point, box, hidden):
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


def main(argv) -> None:
    spec, command = json.loads(argv[0]), argv[1:]
    box = spec["box"]
    fill_box(box, spec["size_mb"])
    if spec["cover"]:
        box = cover_tmp(box, spec["keep"])
    hide(spec["hidden"])
    read_only_elsewhere(box, spec["hidden"])
    os.chdir(os.path.join(box, "home"))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
