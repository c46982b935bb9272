# The grader image: the trusted harness (CLI, suites, oracle, checks) plus a Docker client. It never runs
# candidate code itself: it starts one sandbox container per submission on the host's engine (the socket is
# mounted into THIS container only; sandbox containers never see it).
#
# Context: the repository root. Air-gapped builds pass BASE_IMAGE (e.g. attn-grader-base:bookworm) and put
# wheels in .wheels/ (`bash docker/wheels.sh`; README.md, "The grader in a container (docker compose)").
# .ci/compose-smoke.sh builds it that way and grades through compose.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io python3-venv >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
# The host side never imports torch (gradients are checked against analytic float64 ones), so the grader
# image installs the harness without it: torch lives only in the sandbox image. The requirements come from
# pyproject.toml (docker/requirements.py), at the versions of constraints.txt, the set the tests ran with.
RUN set -eu; python3 -m venv /opt/venv; \
    if ls /src/.wheels/*.whl >/dev/null 2>&1; then idx="--no-index --find-links /src/.wheels"; else idx=""; fi; \
    python3 /src/docker/requirements.py /src > /tmp/requirements.txt; \
    /opt/venv/bin/python -m pip install -q $idx -c /src/constraints.txt -r /tmp/requirements.txt; \
    /opt/venv/bin/python -m pip install -q --no-deps --no-build-isolation $idx /src 2>/dev/null \
      || /opt/venv/bin/python -m pip install -q --no-deps $idx /src; \
    /opt/venv/bin/python -c "import harness.cli, fastapi, sqlalchemy, dramatiq, redis"; \
    rm -rf /src /tmp/requirements.txt
# GRADER_SANDBOX=docker: inside this container a local process would sit next to the Docker socket.
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
    GRADER_SANDBOX=docker \
    GRADER_SANDBOX_TMPDIR=/tmp/attn-grader-staging
ENTRYPOINT ["grade"]
CMD ["--help"]
