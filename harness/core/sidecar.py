"""The sidecar ``.npz`` of a report: small arrays kept from a grading run for the interviewer's HTML page (the
case, the candidate's output and the float64 reference of a few failing tests; see
:func:`harness.grading.artifacts.collect`). Plain arrays only (``allow_pickle=False``); the report's optional
``artifacts`` property names the file, its sha256 and what each entry holds.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np


def encode(items: list[dict], name: str) -> tuple[bytes, dict]:
    """The .npz's bytes and the report's ``artifacts`` entry for a file called ``name``. Stored, not deflated:
    the arrays are floats, which zlib shrinks by ~8 % for ~4 ms of a failing grade's CPU."""
    flat, meta = {}, []
    for i, item in enumerate(items):
        key = f"t{i}"
        for field, arr in item["arrays"].items():
            flat[f"{key}__{field}"] = arr
        meta.append({"test_id": item["test_id"], "key": key, "h": item["h"], "g": item["g"],
                     "dtype": item["dtype"], "kind": item.get("kind", "mha"), "fields": sorted(item["arrays"])})
    buf = io.BytesIO()
    np.savez(buf, **flat)
    data = buf.getvalue()
    return data, {"file": name, "sha256": hashlib.sha256(data).hexdigest(), "items": meta}


def save(items: list[dict], path: str | os.PathLike) -> dict:
    """Write the arrays to ``path`` (.npz, atomically) and return the report's ``artifacts`` entry."""
    path = Path(path)
    data, entry = encode(items, path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return entry


def load(entry: dict | None, report_path: str | os.PathLike | None) -> list[dict]:
    """The items of a report's sidecar (``entry``: its ``artifacts``, :attr:`Report.sidecar`), or [] when there is
    none (or it does not match its recorded hash)."""
    if not entry or report_path is None:
        return []
    path = Path(report_path).resolve().parent / Path(entry["file"]).name
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        return []
    items = []
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        for meta in entry.get("items", []):
            arrays = {f: npz[f"{meta['key']}__{f}"] for f in meta["fields"] if f"{meta['key']}__{f}" in npz}
            items.append({**meta, "arrays": arrays})
    return items
