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
    if not any(line.startswith("NoNewPrivs:") for line in status):  # gVisor's /proc omits it: ask the kernel
        try:
            import ctypes

            r["no_new_privs"] = ctypes.CDLL(None, use_errno=True).prctl(39, 0, 0, 0, 0) == 1  # PR_GET_NO_NEW_PRIVS
        except (OSError, AttributeError):
            pass
    r["docker_sock"] = os.path.exists("/var/run/docker.sock") or os.path.exists("/run/docker.sock")
    # the kernel this container sees: the host's under runc, gVisor's own (4.4.0, "Starting gVisor..." in its
    # kernel log, which it lets any process read) under runsc
    r["kernel"] = os.uname().release
    try:
        with open("/proc/version") as f:
            r["proc_version"] = f.read(300).strip()
    except OSError:
        r["proc_version"] = ""
    try:
        import subprocess

        log = subprocess.run(["dmesg"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        r["kernel_log_head"] = log.stdout.decode(errors="replace")[:200] if log.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        r["kernel_log_head"] = ""
    r["gvisor"] = "gVisor" in r["kernel_log_head"]
    print(json.dumps(r))


if __name__ == "__main__":
    main()
