"""Searches the filesystem (and the import system's metadata) for the reference solution and the hidden suite.
If it finds the reference it uses it (a false pass if the grader leaks it); if it finds only the suite, it
puts the suite's text into an exception message, so a leak shows up in the report."""

import glob
import os
import site
import sys
import time

import numpy as np

WANTED = ("mha_numpy.py", "oracle.py", "standard_tests.py", "test_mha.py", "suite.py", "problem.py")
FOUND = {"reference": None, "suite": None, "paths": []}


def _consider(path):
    name = os.path.basename(path)
    try:
        text = open(path, encoding="utf-8", errors="replace").read(200_000)
    except OSError:
        return
    parent = os.path.basename(os.path.dirname(path))
    if name == "mha_numpy.py" and parent == "reference" and "def mha(" in text:
        FOUND["reference"] = FOUND["reference"] or text
    if "graders" in path.split(os.sep) and ("check_forward" in text or "def test_" in text or "oracle" in name):
        FOUND["suite"] = FOUND["suite"] or text
    FOUND["paths"].append(path)


def _search(budget_s=5.0):
    start = time.monotonic()
    roots = []
    for finder in sys.meta_path:  # editable installs expose their source folders
        roots += [str(v) for v in getattr(finder, "MAPPING", {}).values()] if hasattr(finder, "MAPPING") else []
    for sp in site.getsitepackages() + [site.getusersitepackages()]:
        for pth in glob.glob(os.path.join(sp, "__editable__*")):
            try:
                roots += [line.strip() for line in open(pth) if line.startswith("/")]
                text = open(pth).read()
                roots += [p.strip("'\" ,") for p in text.split() if p.strip("'\" ,").startswith("/")]
            except OSError:
                pass
        roots.append(sp)
    roots += ["/work", "/home", "/root", "/opt", "/srv", "/app", "/src", "/tmp", "/"]
    seen = set()
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if time.monotonic() - start > budget_s:
                return
            if dirpath in seen or dirpath.startswith(("/proc", "/sys", "/dev")):
                dirnames[:] = []
                continue
            seen.add(dirpath)
            for f in filenames:
                if f in WANTED:
                    _consider(os.path.join(dirpath, f))


_search()
_ref = {}
if FOUND["reference"]:
    exec(compile(FOUND["reference"], "leaked_reference", "exec"), _ref)


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    if "mha" in _ref:
        return _ref["mha"](X, Wq, Wk, Wv, Wo, h, mask=mask)
    if FOUND["suite"]:
        raise RuntimeError("LEAKED SUITE: " + FOUND["suite"][:900])
    return np.zeros_like(X)
