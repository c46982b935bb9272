"""The exercise registry: metadata in exercises/<name>/exercise.json, stubs beside it, suites in graders/<name>/."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
from pathlib import Path

from harness.core.errors import UnknownExercise, UsageError

ROOT = Path(__file__).resolve().parents[2]  # the folder holding harness/, exercises/, graders/, reference/
EXERCISES_DIR = ROOT / "exercises"
GRADERS_DIR = ROOT / "graders"
REFERENCE_DIR = ROOT / "reference"
TRACKS = ("numpy", "torch")


@dataclasses.dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    summary: str
    numpy: dict
    torch: dict
    limits: dict

    def track(self, track: str) -> dict:
        return self.numpy if track == "numpy" else self.torch

    def entry(self, track: str) -> str:
        return self.track(track)["entry"]

    def stub_path(self, track: str) -> Path:
        return EXERCISES_DIR / self.name / f"stub_{track}.py"

    def prompt_path(self) -> Path:
        return EXERCISES_DIR / self.name / "README.md"

    @property
    def suite_dir(self) -> Path:
        return GRADERS_DIR / self.name

    def reference_path(self, track: str) -> Path:
        return REFERENCE_DIR / f"{self.name}_{track}.py"


@functools.lru_cache(maxsize=1)
def all_exercises() -> dict[str, Exercise]:
    """Every exercise, in teaching order (exercise.json's "order"; one without it comes last, by name)."""
    metas = [json.loads(meta.read_text()) for meta in EXERCISES_DIR.glob("*/exercise.json")]
    found = {}
    for data in sorted(metas, key=lambda d: (d.get("order", 10**6), d["name"])):
        found[data["name"]] = Exercise(data["name"], data["title"], data["summary"], data["numpy"], data["torch"],
                                       data.get("limits", {}))
    return found


def exercise_list() -> str:
    """The exercises' names for help texts and descriptions, e.g. "mha, masked_mha, ..., flash_attention"."""
    return ", ".join(all_exercises())


def get_exercise(name: str) -> Exercise:
    exercises = all_exercises()
    if name in exercises:
        return exercises[name]
    close = difflib.get_close_matches(name, exercises, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; choose one of: {', '.join(exercises)}"
    raise UnknownExercise(f"unknown exercise {name!r}{hint}")


def check_track(track: str) -> str:
    if track not in TRACKS:
        raise UsageError(f"unknown track {track!r}; choose numpy or torch")
    return track
