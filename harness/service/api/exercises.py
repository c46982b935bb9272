"""/v1/exercises: what can be graded, the prompts and the stubs."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse

from harness.service import grading, rounds
from harness.service.auth import Principal, principal
from harness.service.errors import ApiError
from harness.service.models import ExerciseDetail, ExerciseSummary
from harness.service.api.common import error_responses, track_or_422

router = APIRouter(prefix="/v1/exercises", tags=["exercises"])


def _known(name: str, request: Request | None = None, who: Principal | None = None) -> str:
    """The exercise, if it exists and the caller may see it (a candidate in a round: its exercises only)."""
    allowed = rounds.visible_exercises(request.app.state.store, who) if who else grading.exercise_names()
    if name not in allowed:
        raise ApiError(404, "not_found", f"unknown exercise {name!r}"
                                         f"{grading.did_you_mean(name, grading.exercise_names())}")
    return name


@router.get("", response_model=list[ExerciseSummary], responses=error_responses(401))
def list_exercises(request: Request, who: Principal = Depends(principal)):
    return [grading.exercise_summary(n) for n in rounds.visible_exercises(request.app.state.store, who)]


@router.get("/{name}", response_model=ExerciseDetail, responses=error_responses(401, 404))
def get_exercise(name: str, request: Request, who: Principal = Depends(principal)):
    """The prompt (markdown) and the signatures of its tracks; for admin and interviewer tokens also the
    interviewer notes (markdown)."""
    return grading.exercise_detail(_known(name, request, who), staff=who.is_staff)


@router.get("/{name}/stub", response_class=PlainTextResponse,
            responses={200: {"description": "the stub", "content": {"text/x-python": {"schema": {"type": "string"}}}},
                       **error_responses(401, 404, 422)})
def get_stub(name: str, request: Request, track: str | None = Query(None, max_length=16),
             who: Principal = Depends(principal)):
    """The file to start from, for one track (default: the exercise's first)."""
    name = _known(name, request, who)
    track = track_or_422(track or grading.default_track(name), allow_auto=False, exercise=name)
    return PlainTextResponse(grading.stub_text(name, track), media_type="text/x-python; charset=utf-8",
                             headers={"Content-Disposition": f'attachment; filename="{name}_{track}.py"'})
