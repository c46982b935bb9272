"""The API contract (pydantic v2): request and response bodies as they appear in /openapi.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["queued", "running", "done", "infrastructure_error"]
Verdict = Literal["passed", "failed", "error"]
Role = Literal["admin", "interviewer", "candidate"]


class ErrorDetail(BaseModel):
    status: int
    code: str
    message: str
    details: Any | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Links(BaseModel):
    self: str
    report: str
    report_html: str
    page: str


class SubmissionOut(BaseModel):
    id: str
    status: Status
    exercise: str
    track: str
    track_requested: str
    candidate: str | None
    filename: str
    seed: int | None = Field(None, description="staff only: the seed the test inputs were drawn with")
    sha256: str
    size: int
    received_at: str | None
    started_at: str | None
    finished_at: str | None
    attempts: int
    verdict: Verdict | None
    score: float | None
    max_score: float | None
    error: str | None = None
    queue: Literal["interactive", "bulk", "ci"] = "interactive"
    candidate_id: str | None = None
    round_id: str | None = None
    links: Links
    report: dict[str, Any] | None = Field(None, description="Present when the report was ready within ?wait=S.")


class SubmissionList(BaseModel):
    items: list[SubmissionOut]
    next_cursor: str | None


class SubmissionJSON(BaseModel):
    """The JSON form of POST /v1/submissions (multipart takes the same fields, with `file` for `source`)."""
    model_config = ConfigDict(extra="forbid")
    exercise: str = Field(max_length=64)
    source: str = Field(description="The Python file's text (at most 1 MB as UTF-8).")
    track: str = Field("auto", max_length=16)
    candidate: str | None = Field(None, max_length=200)
    seed: int | None = Field(None, ge=0, le=2**32 - 1)
    callback_url: str | None = Field(None, max_length=2000)
    filename: str | None = Field(None, max_length=255)
    queue: Literal["interactive", "bulk", "ci"] | None = Field(
        None, description="interactive (default; candidates' only choice), bulk (regrades) or ci (CI batches): "
                          "lower-priority queues for staff")


class TrackInfo(BaseModel):
    entry: str
    signature: str


class ExerciseSummary(BaseModel):
    name: str
    title: str
    summary: str
    tracks: dict[str, TrackInfo]


class ExerciseDetail(ExerciseSummary):
    prompt: str
    interviewer_notes: str | None = Field(None, description="Follow-up questions with answers and the mistakes the "
                                                            "grader recognises: admin and interviewer tokens only")


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role
    name: str = Field(min_length=1, max_length=200)
    candidate: str | None = Field(None, max_length=200, description="role candidate: the display name "
                                                                    "(default: name) of a new candidate record")
    candidate_id: str | None = Field(None, max_length=32, description="role candidate: an existing candidate")
    expires: str | None = Field(None, max_length=40, description="a lifetime (30d, 12h, 90m, 45s) or an ISO "
                                                                 "8601 time; default never (the CLI's --expires)")


class TokenOut(BaseModel):
    id: int
    name: str
    role: Role
    candidate: str | None
    candidate_id: str | None = None
    prefix: str
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None


class TokenCreated(TokenOut):
    token: str = Field(description="The secret: shown once, stored only as a hash.")


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, dict[str, Any]]
