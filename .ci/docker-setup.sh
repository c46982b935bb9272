#!/usr/bin/env bash
# Prepare a Docker engine and the grader's sandbox image on a Debian host with no registry but
# PyPI/Debian: install docker.io + debootstrap + runsc (gVisor), register runsc as a Docker runtime,
# start dockerd, build an offline base image with debootstrap, fetch numpy/torch wheels with pip, build
# the sandbox image, check both runtimes with `grade sandbox doctor`. Idempotent; run as root.
# Caches live in /var/cache/attn-grader so a second run takes seconds.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ATTN_GRADER_CACHE:-/var/cache/attn-grader}"
BASE_IMAGE="${ATTN_GRADER_BASE_IMAGE:-attn-grader-base:bookworm}"
SUITE="${ATTN_GRADER_DEBIAN_SUITE:-bookworm}"
PY="${PYTHON:-python3}"
TORCH_VERSION="2.13.0"
DOCKERD_LOG=/tmp/dockerd.log

log() { echo "[docker-setup] $*" >&2; }
mkdir -p "$CACHE"

# -- 1. packages --------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v runsc >/dev/null 2>&1 || missing+=(runsc)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

# -- 1b. gVisor's runsc registered as the Docker runtime "runsc" -----------------------------------
# Merged into an existing daemon.json (other keys and runtimes kept). `--network=none` is required: without
# it gVisor refuses `--network none` containers ("cannot run with network enabled in root network namespace").
DAEMON_JSON="${ATTN_GRADER_DAEMON_JSON:-/etc/docker/daemon.json}"
register_runsc() {  # prints "changed" when it wrote the file
    "$PY" - "$DAEMON_JSON" "$(command -v runsc)" <<'PYEOF'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
try:
    with open(path) as f:
        text = f.read()
    conf = json.loads(text) if text.strip() else {}
except FileNotFoundError:
    conf = {}
if not isinstance(conf, dict):
    sys.exit(f"{path} is not a JSON object; not touching it")
runtimes = conf.setdefault("runtimes", {})
entry = dict(runtimes.get("runsc") or {})
entry.setdefault("path", runsc)
args = list(entry.get("runtimeArgs") or [])
if "--network=none" not in args:
    args.append("--network=none")
entry["runtimeArgs"] = args
if runtimes.get("runsc") != entry:
    runtimes["runsc"] = entry
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".attn-grader.tmp"
    with open(tmp, "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    print("changed")
PYEOF
}
runsc_changed="$(register_runsc)"
[[ -n "$runsc_changed" ]] && log "registered runsc in $DAEMON_JSON" || log "runsc already registered in $DAEMON_JSON"

# -- 2. the engine ------------------------------------------------------------------------------
engine_up() { timeout 10 docker info >/dev/null 2>&1; }
runsc_known() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

wait_engine() {  # $1 = dockerd pid; up to 60 s
    local i
    for i in $(seq 1 120); do
        engine_up && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.5
    done
    return 1
}

# A dockerd that is alive (not a zombie) and may still be starting: give it the full minute first.
live_dockerd() {
    local pid
    for pid in $(pgrep -x dockerd 2>/dev/null); do
        grep -qE '^State:[[:space:]]+Z' "/proc/$pid/status" 2>/dev/null || { echo "$pid"; return 0; }
    done
    return 1
}

# A pid file left by a daemon that was killed (CI ends the session's processes) stops dockerd from starting.
clear_stale_pidfile() {
    local f=/var/run/docker.pid pid
    [[ -e "$f" ]] || return 0
    pid="$(cat "$f" 2>/dev/null || true)"
    if [[ -z "$pid" || ! -e "/proc/$pid" ]] || grep -qE '^State:[[:space:]]+Z' "/proc/$pid/status" 2>/dev/null \
        || [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]]; then
        log "removing stale $f (pid ${pid:-?} is not a running dockerd)"
        rm -f "$f"
    fi
}

if ! engine_up && pid="$(live_dockerd)"; then
    log "dockerd (pid $pid) is running but not answering yet; waiting"
    wait_engine "$pid" || true
fi

if engine_up; then
    log "docker engine already running"
else
    clear_stale_pidfile
    started=0
    # overlay2 (the default) is fast; vfs works everywhere but copies whole layers (a build takes ~10 min).
    for driver in "" vfs; do
        log "starting dockerd${driver:+ with --storage-driver $driver} (log: $DOCKERD_LOG)"
        # setsid: the daemon must outlive this script (the tests run after it).
        setsid dockerd ${driver:+--storage-driver "$driver"} >>"$DOCKERD_LOG" 2>&1 </dev/null &
        pid=$!
        if wait_engine "$pid"; then
            started=1
            break
        fi
        log "dockerd${driver:+ ($driver)} did not come up; last log lines:"
        tail -n 15 "$DOCKERD_LOG" >&2 || true
        kill "$pid" 2>/dev/null || true
        sleep 1
        kill -9 "$pid" 2>/dev/null || true
        clear_stale_pidfile
    done
    if ((!started)); then
        log "ERROR: could not start the docker engine"
        exit 1
    fi
fi
# a running engine reads daemon.json again on SIGHUP (runtimes are reloadable); one started above read it already
if ! runsc_known; then
    pid="$(live_dockerd || cat /var/run/docker.pid 2>/dev/null || true)"
    if [[ -n "$pid" ]]; then
        log "reloading dockerd (pid $pid) so it sees the runsc runtime"
        kill -HUP "$pid"
        for _ in $(seq 1 40); do runsc_known && break; sleep 0.25; done
    fi
    runsc_known || { log "ERROR: the engine does not list the runsc runtime after a reload (see $DOCKERD_LOG)"; exit 1; }
fi
log "engine: $(docker info --format '{{.ServerVersion}} storage={{.Driver}} cgroup={{.CgroupVersion}} runtimes={{range $k, $v := .Runtimes}}{{$k}} {{end}}')"

# -- 3. the offline base image (Debian minbase + python3 + venv) --------------------------------
debian_mirror() {
    local uri
    uri=$(grep -hE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
    if [[ -z "$uri" ]]; then
        uri=$(grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
              | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' | grep -E '/debian/?$' | head -n1 || true)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base image $BASE_IMAGE present"
else
    tarball="$CACHE/base-$SUITE.tar"
    if [[ ! -s "$tarball" ]]; then
        mirror="$(debian_mirror)"
        rootfs="$CACHE/rootfs-$SUITE"
        rm -rf "$rootfs"
        log "debootstrap --variant=minbase $SUITE from $mirror (a few minutes)"
        debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$rootfs" "$mirror" \
            >"$CACHE/debootstrap.log" 2>&1 || { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
        # trim what a sandbox never needs
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
               "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
        tar -C "$rootfs" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
        rm -rf "$rootfs"
    fi
    log "importing $tarball as $BASE_IMAGE"
    docker import "$tarball" "$BASE_IMAGE" >/dev/null
fi

# -- 4. wheels ----------------------------------------------------------------------------------
NUMPY_VERSION="$("$PY" -c 'import numpy; print(numpy.__version__)')"
WHEELS="$CACHE/wheels"
mkdir -p "$WHEELS"
stamp="$WHEELS/.stamp-torch$TORCH_VERSION-numpy$NUMPY_VERSION"
if [[ ! -e "$stamp" ]]; then
    log "pip download torch==$TORCH_VERSION numpy==$NUMPY_VERSION -> $WHEELS"
    "$PY" -m pip download --quiet --only-binary=:all: -d "$WHEELS" \
        "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION"
    touch "$stamp"
fi

# -- 5. the sandbox image -----------------------------------------------------------------------
cd "$REPO"
if "$PY" -m harness sandbox status >/dev/null 2>&1; then
    log "sandbox image up to date"
else
    log "building the sandbox image from $BASE_IMAGE with wheels from $WHEELS"
    "$PY" -m harness sandbox build --base-image "$BASE_IMAGE" --wheels "$WHEELS"
fi

# -- 6. both runtimes really in effect (runc: the host's kernel inside; runsc: gVisor's) --------------
for runtime in runc runsc; do
    if ! out="$("$PY" -m harness sandbox doctor --runtime "$runtime" 2>&1)"; then
        echo "$out" >&2
        log "ERROR: grade sandbox doctor --runtime $runtime failed"
        exit 1
    fi
    log "$(grep 'runtime in effect' <<<"$out")"
done
log "done"
