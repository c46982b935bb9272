"""Run inside a sandbox container by `grade sandbox doctor` (its text, through ``python -c``): prints one JSON
object saying what the container can do (network, writable root and /tmp, capabilities, no_new_privs, the
Docker socket). Standard library only."""

import json
import os
import socket


def main() -> None:
    r = {"uid": os.getuid()}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # a UDP connect only looks up a route (TEST-NET-1): no packet is sent either way
        s.connect(("192.0.2.1", 9))
        r["network"] = True
    except OSError:
        r["network"] = False
    s.close()
    r["interfaces"] = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    try:
        open("/opt/grader/x", "w")
        r["root_writable"] = True
    except OSError:
        r["root_writable"] = False
    try:
        open("/tmp/x", "w").close()
        r["tmp_writable"] = True
    except OSError:
        r["tmp_writable"] = False
    with open("/proc/self/status") as f:
        status = f.read().splitlines()
    caps = [line.split()[1] for line in status if line.startswith("CapEff")]
    r["cap_eff"] = caps[0] if caps else "?"
    r["no_new_privs"] = any(line.split() == ["NoNewPrivs:", "1"] for line in status)
    r["docker_sock"] = os.path.exists("/var/run/docker.sock") or os.path.exists("/run/docker.sock")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
