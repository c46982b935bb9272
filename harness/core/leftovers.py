"""Scratch left by a grader that was killed outright (kill -9, the OOM killer, a power cut): every scratch
folder and file is named with the pid of the process that made it, and is removed at a later start once that
process is gone and the entry is ours (same owner). Names:

    <tmp>/grade-<pid>-*            the local sandbox's working folder
    <tmp>/grade-docker-<pid>-*     the docker sandbox's mount folder (in GRADER_SANDBOX_TMPDIR when set)
    /dev/shm/grade-exchange-<pid>-*  the docker sandbox's input exchange (or GRADER_SANDBOX_TMPDIR, or <tmp>)
    <tmp>/grade-probe-<pid>-*      the local sandbox's capability probe
    <data-dir>/work/sub-<pid>-*    the service's copy of a submission being graded
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

SCRATCH = re.compile(r"^grade-(?:docker-|exchange-|probe-)?(\d+)-")
WORK = re.compile(r"^sub-(\d+)-")


def scratch_prefix(kind: str = "") -> str:
    """The prefix of a new scratch folder of this process: ``grade-[kind-]<pid>-``."""
    return f"grade-{kind + '-' if kind else ''}{os.getpid()}-"


def _gone(pid: int) -> bool:
    """The process has ended: no such pid, or a zombie (dead, only not yet reaped by its parent)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:     # alive, someone else's
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _sweep(folder: Path, pattern: re.Pattern) -> list[str]:
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        m = pattern.match(entry.name)
        if not m:
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != uid or not _gone(int(m.group(1))):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
            removed.append(entry.path)
        except OSError:
            continue
    return removed


def scratch_roots() -> list[Path]:
    roots = [Path(tempfile.gettempdir()), Path("/dev/shm")]
    if os.environ.get("GRADER_SANDBOX_TMPDIR"):
        roots.append(Path(os.environ["GRADER_SANDBOX_TMPDIR"]))
    return list(dict.fromkeys(roots))


def sweep_scratch() -> list[str]:
    """Remove the sandboxes' scratch whose process is gone; the paths removed."""
    return [p for root in scratch_roots() for p in _sweep(root, SCRATCH)]


def sweep_work(work_dir: Path) -> list[str]:
    """Remove the service's submission copies in ``work_dir`` whose process is gone; the paths removed."""
    return _sweep(Path(work_dir), WORK)
