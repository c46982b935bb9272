"""The exercise registry: metadata in exercises/<name>/exercise.json, stubs beside it, suites in graders/<name>/.

An exercise offers the tracks its exercise.json has a key for (``numpy``, ``torch``, ``python``); nothing else
in the grader lists them. A track's spec names its entry point: one function or class (``entry``), or, for an
exercise of several plain functions (``"style": "functions"``), a table ``functions`` of name -> {args,
kwargs, defaults}; the worker then serves the module itself (entry ``MODULE_ENTRY``) and each call names its
function.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from harness.core.errors import UnknownExercise, UsageError

ROOT = Path(__file__).resolve().parents[2]  # the folder holding harness/, exercises/, graders/, reference/
EXERCISES_DIR = ROOT / "exercises"
GRADERS_DIR = ROOT / "graders"
REFERENCE_DIR = ROOT / "reference"
# Every track the worker knows how to run (harness/worker/wire.py TRACKS says the same; a test checks): numpy
# (functions over arrays), torch (modules or functions over tensors), python (plain functions over ints, whose
# answers cross as JSON values). An exercise offers the ones its exercise.json has a key for.
TRACKS = ("numpy", "torch", "python")
MODULE_ENTRY = "*"  # the worker's entry for a "functions" track: the module; each call names its function


@dataclasses.dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    summary: str
    tracks: dict          # track -> spec, in TRACKS order
    limits: dict
    public: dict = dataclasses.field(default_factory=dict)  # what a candidate may see beyond the prompt (the kit)

    @property
    def numpy(self) -> dict:
        return self.tracks.get("numpy", {})

    @property
    def torch(self) -> dict:
        return self.tracks.get("torch", {})

    @property
    def track_names(self) -> tuple[str, ...]:
        return tuple(self.tracks)

    @property
    def default_track(self) -> str:
        return next(iter(self.tracks))

    def track(self, track: str) -> dict:
        return self.tracks[self.check_track(track)]

    def check_track(self, track: str) -> str:
        if track not in self.tracks:
            raise UsageError(f"exercise {self.name!r} has no {track!r} track; choose {' or '.join(self.tracks)}")
        return track

    def functions(self, track: str) -> dict:
        """A "functions" track's table: name -> {args, kwargs, defaults}; empty for any other track."""
        spec = self.track(track)
        return spec.get("functions", {}) if spec.get("style") == "functions" else {}

    def entry(self, track: str) -> str:
        """What the worker serves: the entry point's name, or MODULE_ENTRY for a "functions" track."""
        return MODULE_ENTRY if self.functions(track) else self.track(track)["entry"]

    def entry_label(self, track: str) -> str:
        """What the candidate implements, for people: the entry point, or the functions' names."""
        return ", ".join(self.functions(track)) or self.track(track)["entry"]

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
        tracks = {t: data[t] for t in TRACKS if isinstance(data.get(t), dict)}
        found[data["name"]] = Exercise(data["name"], data["title"], data["summary"], tracks, data.get("limits", {}),
                                       data.get("public", {}))
    return found


def exercise_list() -> str:
    """The exercises' names for help texts and descriptions, e.g. "mha, masked_mha, ..., flash_attention"."""
    return ", ".join(all_exercises())


def get_exercise(name: str) -> Exercise:
    exercises = all_exercises()
    if name in exercises:
        return exercises[name]
    import difflib

    close = difflib.get_close_matches(name, exercises, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; choose one of: {', '.join(exercises)}"
    raise UnknownExercise(f"unknown exercise {name!r}{hint}")


def check_track(track: str, exercise: Exercise | None = None) -> str:
    """A known track (and, given the exercise, one it offers); UsageError otherwise."""
    if track not in TRACKS:
        raise UsageError(f"unknown track {track!r}; choose {', '.join(TRACKS)}")
    return exercise.check_track(track) if exercise is not None else track
