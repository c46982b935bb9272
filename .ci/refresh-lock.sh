#!/usr/bin/env bash
# Refresh constraints.txt, the lock of the exact versions the project is tested with.
#   bash .ci/refresh-lock.sh            # resolve today's newest releases within pyproject.toml's ranges
# It installs the project (all extras) into a throw-away venv WITHOUT the lock, freezes what pip chose and
# writes it to constraints.txt. Then run the tests (`python -m pytest`) in a fresh venv made with the
# README's install command, and commit the new lock with the figures. torch stays pinned to the CPU wheel.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
TORCH_VERSION="2.13.0"
venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
"$PY" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" -e "$REPO[test]"
{
    echo "# The exact versions the project is tested with (Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), $(date -u +%Y-%m-%d))."
    echo "# Install: pip install -c constraints.txt -e \".[test]\"   Refresh: bash .ci/refresh-lock.sh"
    "$venv/bin/pip" freeze --exclude-editable --disable-pip-version-check \
        | grep -viE '^(attention-grader|pip|setuptools|wheel)[=@ ]' \
        | sed -E 's/^(torch==[0-9.]+)\+cpu$/\1/' | LC_ALL=C sort -f
} > "$REPO/constraints.txt"
echo "wrote $REPO/constraints.txt ($(grep -vc '^#' "$REPO/constraints.txt") packages)"
