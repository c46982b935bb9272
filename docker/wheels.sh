#!/usr/bin/env bash
# Download, on a machine that reaches PyPI, every wheel the two images need, at the locked versions
# (constraints.txt): the grader image's requirements (docker/requirements.py) and, for the sandbox image,
# numpy and torch==2.13.0.   Usage: bash docker/wheels.sh [DIR]   (default .wheels, which the grader image's
# build reads; `grade sandbox build --wheels DIR` takes the same folder). Run it with Python 3.11 on x86_64
# Linux, the images' Python and platform.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$REPO/.wheels}"
PY="${PYTHON:-python3}"
mkdir -p "$DIR"
reqs="$(mktemp)"
trap 'rm -f "$reqs"' EXIT
"$PY" "$REPO/docker/requirements.py" "$REPO" > "$reqs"
"$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: -c "$REPO/constraints.txt" -d "$DIR" \
    -r "$reqs" "torch==2.13.0" numpy "setuptools>=68"   # setuptools: the grader image builds the harness offline
echo "$DIR: $(ls "$DIR" | wc -l) wheels"
