"""Sandbox backends: where the candidate's code runs. `get_sandbox` picks one by name."""

from __future__ import annotations

from harness.sandbox.base import Limits, Sandbox, WorkerHandle


def get_sandbox(name: str, *, notice=None, check_at_start: bool = False, hand_off_end: bool = False) -> Sandbox:
    """Return the backend for ``name`` (auto|local|docker). ``notice`` receives one-line messages.
    ``check_at_start``: docker's readiness check runs in its first start, overlapping the container's start
    (:meth:`DockerSandbox.check_at_start`), instead of here. ``hand_off_end``: the process ends right after its
    grade, so a container's kill and removal go to a detached process (:meth:`DockerHandle.hand_off`)."""
    from harness.core.errors import UsageError
    from harness.sandbox.local import LocalSandbox

    if name == "local":
        return LocalSandbox()
    if name in ("docker", "auto"):
        try:
            from harness.sandbox.docker import DockerSandbox
        except ImportError:  # pragma: no cover - the docker backend ships with the package
            DockerSandbox = None
        if name == "docker":
            if DockerSandbox is None:
                from harness.core.errors import SandboxUnavailable

                raise SandboxUnavailable("docker sandbox backend is not available", hint="reinstall the package")
            box = DockerSandbox(hand_off_end=hand_off_end)
            if check_at_start:
                box.check_at_start()
            else:
                box.check()  # raises SandboxUnavailable with a fix hint
            return box
        reason = ("engine", "the docker sandbox backend is not available", "") if DockerSandbox is None \
            else DockerSandbox.unavailable_reason()
        if reason is None:
            return DockerSandbox(hand_off_end=hand_off_end)
        if notice:
            notice(fallback_note(*reason))
        return LocalSandbox()
    raise UsageError(f"unknown sandbox {name!r}; choose auto, local or docker")


def fallback_note(check: str, detail: str, hint: str = "") -> str:
    """The one-line notice of ``--sandbox auto`` falling back to a local process: why Docker is not used (the
    first failing check of `grade sandbox doctor`) and the command that fixes it."""
    fix = "`grade sandbox build`" if check in ("image", "image current") else "see `grade sandbox doctor`"
    return (f"note: grading in a local process (not an isolation boundary): Docker is not used because "
            f"{detail.rstrip('.')}; fix: {fix} (or pass --sandbox local to hide this note)")


__all__ = ["Limits", "Sandbox", "WorkerHandle", "get_sandbox"]
