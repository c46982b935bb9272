"""Run inside a freshly set-up local sandbox by the probe (``python -I -S mount_probe.py BOX SPEC_JSON``): exit 0
only if the home is writable, every other visible mount is read-only, hidden folders show nothing but the
folders kept for the interpreter, and /proc is private. Stand-alone (standard library only); shares the
mount-point parsing of :mod:`mount_setup`."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mount_setup import inside, mount_points, skipped  # noqa: E402


def main(box: str, hidden, keep) -> None:
    with open("probe", "w") as f:
        f.write("ok")
    for point in mount_points():
        if skipped(point, box):
            continue
        try:
            if not os.statvfs(point).f_flag & os.ST_RDONLY:
                sys.exit(f"{point} is writable")
        except OSError:
            pass
    for h in hidden:
        if not os.path.isdir(h):
            continue
        allowed = {os.path.relpath(k, h).split("/")[0] for k in keep if inside(k, h) and k != h}
        if set(os.listdir(h)) - allowed:
            sys.exit(f"the hidden folder {h} shows {sorted(set(os.listdir(h)) - allowed)[:5]}")
    if len([p for p in os.listdir("/proc") if p.isdigit()]) > 5:
        sys.exit("/proc is not private")


if __name__ == "__main__":
    spec = json.loads(sys.argv[2])
    main(sys.argv[1], spec["hidden"], spec["keep"])
