#!/usr/bin/env bash
# Smoke test of docker-compose.yml with Debian's docker-compose (v1): build the grader image as an air-gapped
# host would (BASE_IMAGE=attn-grader-base:bookworm from .ci/docker-setup.sh, wheels from docker/wheels.sh),
# then grade mounted files through `docker-compose run --rm grade`: the reference passes (exit 0), the bundled
# example fails (exit 1), and both reports are valid and say the docker sandbox graded them.
# Needs the engine and a current sandbox image (.ci/docker-setup.sh). Works on a copy of the tracked files.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ATTN_GRADER_CACHE:-/var/cache/attn-grader}"
PY="${PYTHON:-python3}"
log() { echo "[compose-smoke] $*" >&2; }

command -v docker-compose >/dev/null 2>&1 || {
    log "installing Debian's docker-compose"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose) >&2
}
work="$(mktemp -d /tmp/attn-compose-XXXXXX)"
export COMPOSE_PROJECT_NAME="attngradersmoke$$"
cleanup() {
    (cd "$work" && docker-compose down --remove-orphans >/dev/null 2>&1) || true
    rm -rf "$work"
}
trap cleanup EXIT

# the project as a user has it: the tracked files, plus the wheels and the two folders the README asks for
git -C "$REPO" ls-files -z | (cd "$REPO" && xargs -0 tar -cf -) | tar -C "$work" -xf -
wheels="$CACHE/compose-wheels"
stamp="$wheels/.stamp-$(cat "$REPO/constraints.txt" "$REPO/pyproject.toml" "$REPO/docker/requirements.py" "$REPO/docker/wheels.sh" | sha256sum | cut -c1-16)"
if [[ ! -e "$stamp" ]]; then
    log "docker/wheels.sh $wheels"
    PYTHON="$PY" bash "$REPO/docker/wheels.sh" "$wheels" >&2
    touch "$stamp"
fi
mkdir -p "$work/.wheels" "$work/submissions" "$work/reports"
cp "$wheels"/*.whl "$work/.wheels/"
cp "$REPO/reference/mha_numpy.py" "$work/submissions/mha_numpy.py"
cp "$REPO/examples/mha_wrong_scale.py" "$work/submissions/mha_wrong_scale.py"

cd "$work"
export BASE_IMAGE=attn-grader-base:bookworm
docker-compose config -q
log "docker-compose build grade (BASE_IMAGE=$BASE_IMAGE, wheels from .wheels)"
docker-compose build grade > "$work/build.log" 2>&1 || {
    log "FAIL: docker-compose build grade; the last lines of its log:"
    grep -v "^WARNING: Location" "$work/build.log" | tail -n 40 >&2
    exit 1
}
status=0
docker-compose run --rm -T grade mha /submissions/mha_numpy.py --json /reports/ref.json >&2 || status=$?
[[ "$status" == 0 ]] || { log "FAIL: the reference exited $status (expected 0)"; exit 1; }
status=0
docker-compose run --rm -T grade mha /submissions/mha_wrong_scale.py --json /reports/wrong.json >&2 || status=$?
[[ "$status" == 1 ]] || { log "FAIL: the bundled example exited $status (expected 1)"; exit 1; }
"$PY" - "$work/reports" <<'PYEOF'
import json, sys
from pathlib import Path

from harness.core.report import validate_report

reports = Path(sys.argv[1])
ref, wrong = (json.loads((reports / n).read_text()) for n in ("ref.json", "wrong.json"))
assert validate_report(ref) and validate_report(wrong), "a report does not validate"
assert ref["verdict"] == "passed" and ref["environment"]["sandbox"] == "docker", ref["environment"]
assert wrong["verdict"] == "failed" and wrong["diagnosis"][0]["bug"] == "scale_sqrt_d", wrong["diagnosis"]
print("compose smoke: OK (reference passed, example failed with scale_sqrt_d, both graded in the docker sandbox)")
PYEOF
