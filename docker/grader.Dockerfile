# The grader image: the trusted harness (CLI, suites, oracle, checks) plus a Docker client. It never runs
# candidate code itself: it starts one sandbox container per submission on the host's engine (the socket is
# mounted into THIS container only; sandbox containers never see it).
#
# Context: the repository root. Air-gapped builds pass BASE_IMAGE (e.g. attn-grader-base:bookworm) and put
# wheels in .wheels/ (see docker-compose.yml and README.md, "The grader in a container (docker compose)").
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io python3-venv >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
# The host side never imports torch (gradients are checked against analytic float64 ones), so the grader
# image installs the harness without it: torch lives only in the sandbox image.
RUN set -eu; python3 -m venv /opt/venv; \
    if ls /src/.wheels/*.whl >/dev/null 2>&1; then idx="--no-index --find-links /src/.wheels"; else idx=""; fi; \
    /opt/venv/bin/python -m pip install -q $idx "numpy>=1.24" "click>=8.1" "pytest>=7.4" "docker>=7.0" "rich>=13" "matplotlib>=3.7" "pygments>=2.12" \
      "fastapi>=0.115,<1" "uvicorn>=0.30,<1" "sqlalchemy>=2.0,<3" "alembic>=1.13,<2" "jinja2>=3.1,<4" \
      "python-multipart>=0.0.9,<1" "psycopg[binary]>=3.1,<4" "dramatiq>=2.0,<3" "redis>=5.0,<9"; \
    /opt/venv/bin/python -m pip install -q --no-deps --no-build-isolation $idx /src 2>/dev/null \
      || /opt/venv/bin/python -m pip install -q --no-deps $idx /src; \
    rm -rf /src
# GRADER_SANDBOX=docker: inside this container a local process would sit next to the Docker socket.
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
    GRADER_SANDBOX=docker \
    GRADER_SANDBOX_TMPDIR=/tmp/attn-grader-staging
ENTRYPOINT ["grade"]
CMD ["--help"]
