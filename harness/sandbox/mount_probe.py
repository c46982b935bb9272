"""Run inside a freshly set-up local sandbox by the probe (``python -I -S mount_probe.py BOX HIDDEN...``): exit 0
only if the home is writable, every other visible mount is read-only, hidden folders are empty and /proc is
private. Stand-alone (standard library only); shares the mount-point parsing of :mod:`mount_setup`."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mount_setup import mount_points, skipped  # noqa: E402


def main(box: str, hidden) -> None:
    with open("probe", "w") as f:
        f.write("ok")
    for point in mount_points():
        if skipped(point, box, hidden):
            continue
        try:
            if not os.statvfs(point).f_flag & os.ST_RDONLY:
                sys.exit(f"{point} is writable")
        except OSError:
            pass
    if any(os.path.isdir(h) and os.listdir(h) for h in hidden):
        sys.exit("a hidden folder is visible")
    if len([p for p in os.listdir("/proc") if p.isdigit()]) > 5:
        sys.exit("/proc is not private")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
