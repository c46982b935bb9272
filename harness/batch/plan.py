"""What a batch will grade: the submissions under the given paths, each with a stable report file name
(``<path slug>.<sha256[:16]>.json``) and the key that says whether an existing report is still current."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

from harness import __version__
from harness.core.errors import GraderError, UsageError

_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


@dataclasses.dataclass
class BatchOptions:
    exercise: str
    out: Path
    track: str = "auto"
    sandbox: str = "auto"
    jobs: int = 1
    seed: int = 0
    limits: dict = dataclasses.field(default_factory=dict)
    resume: bool = False
    keep_artifacts: bool = True
    warm: bool | None = None               # warm workers (harness/session/warm.py); None: where they pay
                                           # (local; grading.engine.warm_pays), False: a cold start each
    submission_timeout_s: float = 1800.0   # batch watchdog per submission (the engine bounds itself first)


@dataclasses.dataclass
class Item:
    path: Path
    label: str                 # the path as shown (relative to the working directory when inside it)
    slug: str
    sha256: str
    size: int
    key: dict
    report_path: Path
    outcome: str = "pending"   # passed | failed | error | infrastructure
    resumed: bool = False
    report: dict | None = None
    seconds: float = 0.0
    refused: str | None = None  # why it is not graded (a symbolic link): its report says so

    @property
    def npz_path(self) -> Path:
        return self.report_path.with_suffix(".npz")


def symlink_refusal(path: Path) -> str | None:
    """Why ``path`` is not graded: it is a symbolic link (lstat; never followed, so a folder holding
    ``solution.py -> ~/.ssh/id_rsa`` cannot make the grader read that file, send it into the sandbox and
    print it in a report)."""
    if path.is_symlink():
        return (f"{path} is a symbolic link; grade batch does not follow links (copy the file into the folder "
                "instead)")
    return None


def discover(paths) -> list[Path]:
    """Submissions from files and folders (every ``.py`` below a folder, hidden folders and caches skipped;
    symbolic links are listed, not followed: :func:`symlink_refusal`)."""
    found, seen = [], set()
    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            raise UsageError(f"{str(p)!r} does not exist")
        if p.is_symlink():
            files = [p]
        elif p.is_dir():
            files = sorted(f for f in p.rglob("*.py") if (f.is_file() or f.is_symlink())
                           and not any(part.startswith(".") or part == "__pycache__"
                                       for part in f.relative_to(p).parts))
        else:
            files = [p]
        for f in files:
            r = f.absolute() if f.is_symlink() else f.resolve()
            if r not in seen:
                seen.add(r)
                found.append(f)
    if not found:
        raise UsageError("no submissions found (expected .py files or folders containing them)")
    return found


def label_for(path: Path) -> str:
    r = path.absolute() if path.is_symlink() else path.resolve()
    try:
        return r.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return r.as_posix()


def slug_for(label: str) -> str:
    s = _SLUG_BAD.sub("_", label.strip("/").replace("/", "__")).lstrip(".") or "submission"
    if len(s) > 120:
        s = s[:100] + "-" + hashlib.sha1(label.encode()).hexdigest()[:12]
    return s


def report_name(slug: str, sha256: str) -> str:
    return f"{slug}.{sha256[:16]}.json"


def _hash_file(path: Path) -> tuple[str, int]:
    try:
        data = path.read_bytes()
    except OSError:
        return "0" * 64, 0
    return hashlib.sha256(data).hexdigest(), len(data)


def _key_track(path: Path, exercise, track: str) -> str:
    if track != "auto":
        return track
    from harness.grading.submission import detect_track, load_submission

    try:
        return detect_track(load_submission(path), exercise)
    except GraderError:
        return "auto"


def plan(paths, opts: BatchOptions) -> list[Item]:
    from harness.core.exercises import get_exercise

    ex = get_exercise(opts.exercise)  # unknown exercise: UsageError before anything runs
    files = discover(paths)
    labels = [label_for(f) for f in files]
    slugs = [slug_for(lb) for lb in labels]
    dupes = {s for s in slugs if slugs.count(s) > 1}
    items = []
    for f, lb, sl in zip(files, labels, slugs):
        if sl in dupes:
            sl = f"{sl}-{hashlib.sha1(lb.encode()).hexdigest()[:8]}"
        refused = symlink_refusal(f)
        if refused:   # named by the link, never read through it
            sha, size = hashlib.sha256(b"symlink:" + os.fsencode(os.readlink(f))).hexdigest(), 0
            track = opts.track
        else:
            sha, size = _hash_file(f)
            track = _key_track(f, ex, opts.track)
        key = {"sha256": sha, "exercise": ex.name, "track": track, "harness": __version__}
        items.append(Item(path=f, label=lb, slug=sl, sha256=sha, size=size, key=key,
                          report_path=Path(opts.out) / report_name(sl, sha), refused=refused))
    return items
