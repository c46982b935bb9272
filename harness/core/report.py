"""The grading report: dataclasses with ``to_dict()``; the JSON Schema ships in harness/schema/."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

SCHEMA_ID = "attention-grader/report/v1"
SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "report.schema.json"
CATEGORIES = ("shape", "numeric", "edge", "gradient", "structure")
STATUSES = ("passed", "failed", "error", "timeout", "memory", "output_limit", "skipped")


@dataclasses.dataclass
class TestResult:
    id: str
    category: str
    status: str
    points: float
    max_points: float
    visibility: str = "visible"
    message: str = ""
    diagnostics: dict = dataclasses.field(default_factory=dict)
    duration_s: float = 0.0
    description: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Diagnosis:
    bug: str
    summary: str
    hint: str
    evidence: dict

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Report:
    exercise: str
    track: str
    verdict: str
    score: float
    max_score: float
    tests: list[TestResult]
    diagnosis: list[Diagnosis]
    environment: dict
    submission: dict
    timings: dict
    schema: str = SCHEMA_ID

    def to_dict(self) -> dict:
        return {"schema": self.schema, "exercise": self.exercise, "track": self.track, "verdict": self.verdict,
                "score": self.score, "max_score": self.max_score, "tests": [t.to_dict() for t in self.tests],
                "diagnosis": [d.to_dict() for d in self.diagnosis], "environment": self.environment,
                "submission": self.submission, "timings": self.timings}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False, default=_jsonable)

    def write(self, path: str | os.PathLike) -> None:
        """Write the JSON report; arrays kept by ``grade(keep_artifacts=True)`` go to a sidecar ``.npz`` first."""
        path = Path(path)
        items = getattr(self, "artifacts", None)
        try:
            if not items:
                write_atomic(path, self.to_json() + "\n")
                return
            from harness.grading import artifacts

            data = json.loads(self.to_json())
            data["artifacts"] = artifacts.save(items, path.with_suffix(".npz"))
            write_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
        except OSError as exc:  # a full disk, a read-only folder: ours to fix, never the candidate's verdict
            from harness.core.errors import InfrastructureError

            raise InfrastructureError(f"could not write the report to {path}: {exc.strerror or exc}") from exc

    def by_category(self) -> dict[str, dict]:
        out = {}
        for t in self.tests:
            c = out.setdefault(t.category, {"passed": 0, "total": 0, "score": 0.0, "max_score": 0.0})
            c["total"] += 1
            c["passed"] += t.status == "passed"
            c["score"] += t.points
            c["max_score"] += t.max_points
        return out


def _jsonable(obj):
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(obj)


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same folder and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())
