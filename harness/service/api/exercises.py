"""/v1/exercises: what can be graded, the prompts and the stubs."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse

from harness.service import grading
from harness.service.auth import Principal, principal
from harness.service.errors import ApiError
from harness.service.models import ExerciseDetail, ExerciseSummary
from harness.service.api.common import error_responses, track_or_422

router = APIRouter(prefix="/v1/exercises", tags=["exercises"])


def _known(name: str) -> str:
    if name not in grading.exercise_names():
        raise ApiError(404, "not_found", f"unknown exercise {name!r}"
                                         f"{grading.did_you_mean(name, grading.exercise_names())}")
    return name


@router.get("", response_model=list[ExerciseSummary], responses=error_responses(401))
def list_exercises(who: Principal = Depends(principal)):
    return [grading.exercise_summary(n) for n in grading.exercise_names()]


@router.get("/{name}", response_model=ExerciseDetail, responses=error_responses(401, 404))
def get_exercise(name: str, who: Principal = Depends(principal)):
    """The prompt (markdown) and the signatures of its tracks; for admin and interviewer tokens also the
    interviewer notes (markdown)."""
    return grading.exercise_detail(_known(name), staff=who.is_staff)


@router.get("/{name}/stub", response_class=PlainTextResponse,
            responses={200: {"description": "the stub", "content": {"text/x-python": {"schema": {"type": "string"}}}},
                       **error_responses(401, 404, 422)})
def get_stub(name: str, track: str | None = Query(None, max_length=16), who: Principal = Depends(principal)):
    """The file to start from, for one track (default: the exercise's first)."""
    name = _known(name)
    track = track_or_422(track or grading.default_track(name), allow_auto=False, exercise=name)
    return PlainTextResponse(grading.stub_text(name, track), media_type="text/x-python; charset=utf-8",
                             headers={"Content-Disposition": f'attachment; filename="{name}_{track}.py"'})
