"""`grade kit build --out DIR`: the candidate kit as a wheel and a zip.

The staging folder gets kit/pyproject.toml and kit/README.md, gradekit/ as the package attention_kit, and per
exercise what a candidate may read: the prompt (exercises/<name>/README.md, never interviewer.md), the stubs,
exercise.json without anything but names, titles and signatures, and the public vectors the references
compute now. Nothing else of the repository is copied: no reference, suite, oracle, catalogue or harness."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from gradekit.exercises import names, tracks_of
from harness.core.errors import InfrastructureError, UsageError
from harness.core.exercises import EXERCISES_DIR, ROOT
from harness.kit import vectors

KIT_DIR = ROOT / "kit"
PACKAGE_DIR = ROOT / "gradekit"
PUBLIC_KEYS = ("name", "title", "summary")


def stage(dest: Path, *, skip_track=lambda exercise, track: False) -> Path:
    """Lay out the kit's source tree in ``dest``; returns it."""
    if not (KIT_DIR / "pyproject.toml").is_file():
        raise UsageError(f"grade kit build runs in a source checkout of attention-grader (no {KIT_DIR}/pyproject.toml)")
    shutil.copy2(KIT_DIR / "pyproject.toml", dest / "pyproject.toml")
    shutil.copy2(KIT_DIR / "README.md", dest / "README.md")
    pkg = dest / "attention_kit"
    pkg.mkdir()
    for src in sorted(PACKAGE_DIR.glob("*.py")):
        shutil.copy2(src, pkg / src.name)
    for name in names(EXERCISES_DIR):
        meta = json.loads((EXERCISES_DIR / name / "exercise.json").read_text(encoding="utf-8"))
        tracks = {t: spec for t, spec in tracks_of(meta).items() if not skip_track(name, t)}
        out = pkg / "exercises" / name
        out.mkdir(parents=True)
        public = {k: meta[k] for k in PUBLIC_KEYS if k in meta}
        (out / "exercise.json").write_text(json.dumps({**public, **tracks}, indent=2) + "\n", encoding="utf-8")
        shutil.copy2(EXERCISES_DIR / name / "README.md", out / "README.md")
        for track in tracks:
            shutil.copy2(EXERCISES_DIR / name / f"stub_{track}.py", out / f"stub_{track}.py")
            vectors.build_track(name, track, out / "vectors" / track)
    return dest


def build_wheel(src: Path, out: Path) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
           "-w", str(out), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src)
    wheels = sorted(out.glob("attention_grader_kit-*.whl"))
    if done.returncode != 0 or not wheels:
        raise InfrastructureError(f"building the kit's wheel failed: {(done.stderr or done.stdout).strip()[-800:]}")
    return wheels[-1]


def requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines of the wheel's metadata (the kit's dependencies, extras marked)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def build(out: Path, *, skip_track=lambda exercise, track: False) -> dict:
    """Build the wheel and the zip into ``out``: {"wheel", "zip", "requirements", "files"}."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grader-kit-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        stage(src, skip_track=skip_track)
        wheel = build_wheel(src, out)
        top = wheel.name.split("-py")[0].replace("attention_grader_kit", "attention-grader-kit")
        archive = out / f"{top}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            z.write(src / "README.md", f"{top}/README.md")
            z.write(wheel, f"{top}/{wheel.name}")
            for path in sorted((src / "attention_kit" / "exercises").rglob("*")):
                if path.is_file():
                    z.write(path, f"{top}/exercises/{path.relative_to(src / 'attention_kit' / 'exercises')}")
    with zipfile.ZipFile(wheel) as z:
        files = z.namelist()
    return {"wheel": wheel, "zip": archive, "requirements": requirements(wheel), "files": files}
