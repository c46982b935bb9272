"""The grading report: dataclasses with ``to_dict()`` / ``from_dict()``, the JSON Schema (harness/core/schema/), and
reading reports back (validated); the lookups every reader shares (the batch's own error)."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from harness.core.errors import InfrastructureError, UsageError

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
    # a candidate's view of a hidden test (harness.core.audience): its message, diagnostics and description
    # withheld. Not in the schema: the JSON carries ``"redacted": true`` only on such a test (the candidate
    # view the service returns), never on a report as graded
    redacted: bool = False

    def to_dict(self) -> dict:
        d = {f: _copied(getattr(self, f)) for f in _TEST_FIELDS}
        if self.redacted:
            d["redacted"] = True
        return d


@dataclasses.dataclass
class Diagnosis:
    bug: str
    summary: str
    hint: str
    evidence: dict

    def to_dict(self) -> dict:
        return {"bug": self.bug, "summary": self.summary, "hint": self.hint, "evidence": _copied(self.evidence)}


_TEST_FIELDS = tuple(f.name for f in dataclasses.fields(TestResult) if f.name != "redacted")


def _copied(value: object) -> object:
    """``dataclasses.asdict``'s copy of a field, without its deep copy of every leaf (a report's tests are plain
    JSON values: ~4x faster): dicts, lists and tuples are copied, a dataclass becomes a dict, anything else is
    shared."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind is tuple:
        return tuple(_copied(v) for v in value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if dataclasses.is_dataclass(value) or isinstance(value, (dict, list, tuple)):   # e.g. a namedtuple: asdict's
        return dataclasses.asdict(_Holder(value))["value"]                            # own copy, rare
    return value


@dataclasses.dataclass
class _Holder:
    value: object


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
    # arrays kept by grade(keep_artifacts=True) for the HTML page's plots: not part of the JSON; write() puts
    # them in a sidecar .npz (harness.core.sidecar) and the JSON's ``artifacts`` names it
    artifacts: list | None = dataclasses.field(default=None, repr=False, compare=False)
    extra: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # e.g. a read-back `artifacts`
    # the round's feedback this view was cut to ("summary": harness.service.rounds.summary_report); not in the
    # schema, in the JSON only when set
    feedback: str | None = None

    @classmethod
    def from_dict(cls, data: dict) -> "Report":
        """A report from its JSON form (validate it first: :func:`read_report`); ``to_dict()`` gives it back."""
        known = {"schema", "exercise", "track", "verdict", "score", "max_score", "tests", "diagnosis",
                 "environment", "submission", "timings", "feedback"}
        return cls(exercise=data["exercise"], track=data["track"], verdict=data["verdict"], score=data["score"],
                   max_score=data["max_score"], tests=[TestResult(**t) for t in data["tests"]],
                   diagnosis=[Diagnosis(**d) for d in data["diagnosis"]], environment=data["environment"],
                   submission=data["submission"], timings=data["timings"], schema=data.get("schema", SCHEMA_ID),
                   extra={k: v for k, v in data.items() if k not in known}, feedback=data.get("feedback"))

    def to_dict(self) -> dict:
        return {"schema": self.schema, "exercise": self.exercise, "track": self.track, "verdict": self.verdict,
                "score": self.score, "max_score": self.max_score, "tests": [t.to_dict() for t in self.tests],
                "diagnosis": [d.to_dict() for d in self.diagnosis], "environment": self.environment,
                "submission": self.submission, "timings": self.timings, **self.extra,
                **({"feedback": self.feedback} if self.feedback is not None else {})}

    @property
    def sidecar(self) -> dict | None:
        """The read-back ``artifacts`` entry naming the report's sidecar .npz (file, sha256, items), if any."""
        return self.extra.get("artifacts")

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON; ``indent=None``: compact, by the json module's C encoder (an indented dump goes
        through its Python one: ~2.5x slower on a report), for JSON that only a program reads."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, default=_jsonable)

    def write(self, path: str | os.PathLike) -> None:
        """Write the JSON report; arrays kept by ``grade(keep_artifacts=True)`` go to a sidecar ``.npz`` first."""
        path = Path(path)
        try:
            if not self.artifacts:
                write_atomic(path, self.to_json() + "\n")
                return
            from harness.core import sidecar

            data = json.loads(self.to_json(indent=None))
            data["artifacts"] = sidecar.save(self.artifacts, path.with_suffix(".npz"))
            write_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
        except OSError as exc:  # a full disk, a read-only folder: ours to fix, never the candidate's verdict
            raise InfrastructureError(f"could not write the report to {path}: {exc.strerror or exc}") from exc


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


def validate_report(data: object) -> bool:
    """Whether ``data`` is a report that validates against the shipped JSON Schema."""
    if not isinstance(data, dict):
        return False
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema ships with the test extras
        return data.get("schema") == SCHEMA_ID and isinstance(data.get("tests"), list)
    try:
        jsonschema.validate(data, load_schema())
    except jsonschema.ValidationError:
        return False
    return True


def load_valid_report(path: Path) -> dict | None:
    """The report at ``path`` if it is complete, parses and validates; else None."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if validate_report(data) else None


def read_report(path: str | os.PathLike) -> Report:
    """A report from disk, validated against the schema; UsageError (exit 2) when it is not one."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"report {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{str(p)!r} is not a JSON report ({type(exc).__name__})") from None
    if not validate_report(data):
        raise UsageError(f"{str(p)!r} is not a valid grading report (schema {SCHEMA_ID})")
    return Report.from_dict(data)


def batch_error(report: Report) -> dict | None:
    """The error a batch recorded for a submission it could not grade ({kind: usage|infrastructure, message})."""
    return _batch_error(report.environment)


def is_infrastructure(data: dict) -> bool:
    """Not a verdict on the submission: the grader failed (graded again on resume). ``data``: a report's JSON (the
    batch reads its own files back as such)."""
    return (_batch_error(data.get("environment", {})) or {}).get("kind") == "infrastructure"


def _batch_error(environment: dict) -> dict | None:
    return environment.get("batch", {}).get("error")
