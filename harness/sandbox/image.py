"""Build and check the Docker sandbox image (`grade sandbox build|doctor|status`; also `python -m harness
sandbox ...` where the console script is not on PATH)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness.sandbox.base import WORKER_DIR, WORKER_FILES, DoctorCheck, Limits
from harness.sandbox.docker import LABEL, DockerSandbox, api_client, default_image, probe, worker_sha256

DOCKERFILE = Path(__file__).resolve().parent / "sandbox.Dockerfile"  # shipped inside the package
BUILD_TIMEOUT_S = 3600


def _dockerfile_text() -> str:
    try:
        return DOCKERFILE.read_text()
    except OSError as exc:
        from harness.core.errors import InfrastructureError

        raise InfrastructureError(f"sandbox Dockerfile not found at {DOCKERFILE}") from exc


def _assemble_context(ctx: Path, wheels: Path | None) -> int:
    (ctx / "Dockerfile").write_text(_dockerfile_text())
    for name in WORKER_FILES:
        shutil.copyfile(WORKER_DIR / name, ctx / name)
    (ctx / "wheels").mkdir()
    count = 0
    if wheels is not None:
        for whl in sorted(wheels.glob("*.whl")):
            dest = ctx / "wheels" / whl.name
            try:
                dest.hardlink_to(whl)  # cheap when on the same file system
            except OSError:
                shutil.copyfile(whl, dest)
            count += 1
    return count


def build_image(*, base_image: str | None = None, wheels: str | Path | None = None, tag: str | None = None,
                progress: Callable[[str], None] | None = None) -> str:
    """Build the sandbox image and return its tag.

    ``base_image`` defaults to ``python:3.11-slim`` (pulled from the registry); ``wheels`` is a folder of wheels
    (numpy, torch==2.13.0 and their dependencies) for an offline install. The image is labelled with the harness
    version and the worker's sha256 so :func:`doctor` can tell a stale image.
    """
    from docker.errors import APIError, BuildError, DockerException

    from harness import __version__
    from harness.core.errors import InfrastructureError, UsageError

    say = progress or (lambda line: None)
    tag = tag or default_image()
    wheel_dir = None
    if wheels is not None:
        wheel_dir = Path(wheels).expanduser().resolve()
        if not wheel_dir.is_dir():
            raise UsageError(f"wheels folder {wheels} does not exist")
    buildargs = {"GRADER_VERSION": __version__, "WORKER_SHA256": worker_sha256()}
    if base_image:
        buildargs["BASE_IMAGE"] = base_image
    with tempfile.TemporaryDirectory(prefix="grader-build-") as tmp:
        ctx = Path(tmp)
        n = _assemble_context(ctx, wheel_dir)
        say(f"building {tag} from {base_image or 'python:3.11-slim'}"
            + (f" with {n} wheels from {wheel_dir}" if wheel_dir else " (numpy from PyPI, torch from the CPU index)"))
        try:
            client = api_client(timeout=BUILD_TIMEOUT_S)
        except DockerException as exc:
            raise InfrastructureError(f"Docker engine not reachable: {exc}") from exc
        image_id = None
        started = time.monotonic()
        try:
            stream = client.build(path=str(ctx), tag=tag, buildargs=buildargs, rm=True, forcerm=True,
                                  pull=False, decode=True)
            for chunk in stream:
                if "error" in chunk:
                    detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    raise InfrastructureError(f"sandbox image build failed: {detail.strip()}")
                text = chunk.get("stream")
                if text:
                    for line in text.rstrip("\n").splitlines():
                        if line.strip():
                            say(line)
                elif chunk.get("status"):
                    say(" ".join(str(chunk[k]) for k in ("status", "id", "progress") if chunk.get(k)))
                aux = chunk.get("aux") or {}
                if aux.get("ID"):
                    image_id = aux["ID"]
        except (APIError, BuildError) as exc:
            raise InfrastructureError(f"sandbox image build failed: {exc}") from exc
        finally:
            client.close()
    say(f"built {tag} ({(image_id or '')[7:19]}) in {time.monotonic() - started:.0f} s")
    return tag


# -- doctor -----------------------------------------------------------------------------------------------
# Run inside a sandbox container by `doctor` (python -c, its text): what the container can do.
LIMITS_PROBE = Path(__file__).resolve().parent / "limits_probe.py"


def _limits_check(image: str) -> DoctorCheck:
    name = "limits effective"
    limits = Limits()
    box = DockerSandbox(image)
    with tempfile.TemporaryDirectory(prefix="grader-doctor-") as tmp:
        (Path(tmp) / "submission.py").write_text("")
        cmd = box.command(name=f"grader-doctor-{int(time.time() * 1000)}", track="numpy", entry="x",
                          mount_dir=tmp, limits=limits, started=time.time())
        at = cmd.index(image)
        cmd = [*cmd[:at], "--rm", image, "python3", "-I", "-B", "-c", LIMITS_PROBE.read_text()]
        import os

        os.chmod(tmp, 0o755)
        try:
            run = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return DoctorCheck(name, False, "the probe container did not finish in 60 s",
                               "check the engine (`docker info`)")
    if run.returncode != 0:
        err = run.stderr.decode(errors="replace").strip().splitlines()
        return DoctorCheck(name, False, f"probe container failed ({run.returncode}): {(err or ['?'])[-1][:300]}",
                           "check `docker info` and that the engine supports --read-only/--cap-drop/--pids-limit")
    try:
        r = json.loads(run.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return DoctorCheck(name, False, f"probe output unreadable: {run.stdout[:200]!r}", "rebuild the image")
    bad = []
    if r.get("network") or [i for i in r.get("interfaces", []) if i != "lo"]:
        bad.append(f"network reachable (interfaces {r.get('interfaces')})")
    if r.get("root_writable"):
        bad.append("root file system writable")
    if not r.get("tmp_writable"):
        bad.append("/tmp scratch not writable")
    if r.get("uid") == 0:
        bad.append("runs as root")
    if r.get("cap_eff") not in ("0000000000000000",):
        bad.append(f"capabilities {r.get('cap_eff')}")
    if not r.get("no_new_privs"):
        bad.append("no_new_privs not set")
    if r.get("docker_sock"):
        bad.append("docker socket visible")
    if bad:
        return DoctorCheck(name, False, "sandbox not hardened: " + "; ".join(bad),
                           "use a Docker engine that honours --network none/--read-only/--cap-drop/--user")
    return DoctorCheck(name, True, f"no network, read-only root, uid {r['uid']}, no capabilities, "
                                   "no_new_privs, writable /tmp only", "")


def doctor(*, image: str | None = None) -> list[DoctorCheck]:
    """Checks, each ok or with a fix hint: engine reachable, image present, image current, limits effective.

    Docker grading would fail unless every check is ok.
    """
    image = image or default_image()
    checks = list(probe(image, timeout=3.0))
    if len(checks) == 3 and all(c.ok for c in checks):
        try:
            checks.append(_limits_check(image))
        except Exception as exc:  # keep doctor a report, never a crash
            checks.append(DoctorCheck("limits effective", False, f"{type(exc).__name__}: {exc}",
                                      "check `docker info`"))
    else:
        names = [c.name for c in checks]
        for name in ("engine", "image", "image current", "limits effective"):
            if name not in names:
                checks.append(DoctorCheck(name, False, "not checked (an earlier check failed)",
                                          "fix the check above first"))
    return checks


def leftover_containers() -> list[str]:
    """Names of grader containers that exist now (tests use it to prove nothing is left behind)."""
    client = api_client(timeout=10)
    try:
        return [(c.get("Names") or ["?"])[0].lstrip("/")
                for c in client.containers(all=True, filters={"label": LABEL})]
    finally:
        client.close()
