"""Sandbox backends: where the candidate's code runs. `get_sandbox` picks one by name."""

from __future__ import annotations

from harness.sandbox.base import Limits, Sandbox, WorkerHandle


def get_sandbox(name: str, *, notice=None) -> Sandbox:
    """Return the backend for ``name`` (auto|local|docker). ``notice`` receives one-line messages."""
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
            box = DockerSandbox()
            box.check()  # raises SandboxUnavailable with a fix hint
            return box
        if DockerSandbox is not None and DockerSandbox.available():
            return DockerSandbox()
        if notice:
            notice("note: Docker sandbox unavailable, grading in a local process (not an isolation boundary)")
        return LocalSandbox()
    raise UsageError(f"unknown sandbox {name!r}; choose auto, local or docker")


__all__ = ["Limits", "Sandbox", "WorkerHandle", "get_sandbox"]
