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
from harness.sandbox.docker import (DOCKERFILE, LABEL, DockerSandbox, api_client, check_runtime, default_image,
                                    default_runtime, probe, register_hint, sdk_client, worker_sha256)

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

    from harness.core.version import __version__
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
            client = sdk_client(timeout=BUILD_TIMEOUT_S)  # a streamed build context: docker-py's
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


def _limits_check(image: str, runtime: str | None = None) -> list[DoctorCheck]:
    """Run the probe container once (the sandbox's own flags, under ``runtime``): the limits in force, and which
    kernel the container really runs on."""
    box = DockerSandbox(image, runtime=runtime)
    r = _probe_container(box)
    if isinstance(r, DoctorCheck):
        return [r, DoctorCheck("runtime in effect", False, "not checked (the probe container failed)",
                               "fix the check above first")]
    return [_hardening_check(r), _runtime_effect_check(r, box.runtime)]


def _runtime_effect_check(r: dict, runtime: str) -> DoctorCheck:
    """The kernel seen inside against the engine host's: runc shares it, gVisor shows its own."""
    name = "runtime in effect"
    try:
        client = api_client(timeout=10)
        try:
            host_kernel = str(client.info().get("KernelVersion") or "?")
        finally:
            client.close()
    except Exception as exc:
        return DoctorCheck(name, False, f"cannot read the engine's kernel: {type(exc).__name__}: {exc}",
                           "check `docker info`")
    inside, gvisor = r.get("kernel", "?"), bool(r.get("gvisor"))
    seen = f"kernel seen inside {inside} (engine host {host_kernel})"
    if runtime == "runsc":
        if gvisor:
            return DoctorCheck(name, True, f"runsc: gVisor's user-space kernel ({seen}; its kernel log says gVisor)")
        return DoctorCheck(name, False, f"runsc was asked for but the container does not run on gVisor ({seen})",
                           register_hint("runsc") + "; and check the `runsc` entry of `docker info` Runtimes")
    if gvisor or inside != host_kernel:
        return DoctorCheck(name, False, f"{runtime} was asked for but the container does not share the host's kernel "
                           f"({seen}{'; gVisor' if gvisor else ''})",
                           "check /etc/docker/daemon.json: `runtimes` and `default-runtime`")
    return DoctorCheck(name, True, f"{runtime}: containers share the host's kernel ({seen})")


def _probe_container(box: DockerSandbox) -> dict | DoctorCheck:
    name = "limits effective"
    image = box.image
    limits = Limits()
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
        return json.loads(run.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return DoctorCheck(name, False, f"probe output unreadable: {run.stdout[:200]!r}", "rebuild the image")


def _hardening_check(r: dict) -> DoctorCheck:
    name = "limits effective"
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


DOCTOR_CHECKS = ("engine", "runtime", "image", "image current", "limits effective", "runtime in effect")


def doctor(*, image: str | None = None, runtime: str | None = None) -> list[DoctorCheck]:
    """Checks, each ok or with a fix hint: engine reachable, runtime registered (runc, or runsc = gVisor; default
    ``$GRADER_DOCKER_RUNTIME`` or runc), image present, image current, limits effective, runtime in effect (the
    kernel a sandbox container sees: the host's under runc, gVisor's under runsc).

    Docker grading would fail (or not be what was asked for) unless every check is ok.
    """
    image = image or default_image()
    runtime = check_runtime(runtime or default_runtime())
    checks = list(probe(image, timeout=3.0, runtime=runtime))
    if len(checks) == 4 and all(c.ok for c in checks):
        try:
            checks += _limits_check(image, runtime)
        except Exception as exc:  # keep doctor a report, never a crash
            checks += [DoctorCheck(name, False, f"{type(exc).__name__}: {exc}", "check `docker info`")
                       for name in ("limits effective", "runtime in effect")]
    else:
        names = [c.name for c in checks]
        for name in DOCTOR_CHECKS:
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
