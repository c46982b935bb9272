"""The exercises a kit knows: `<dir>/<name>/exercise.json` (name, title, summary and one object per track with
its entry point), the prompt README.md and a stub per track beside it, and the public vectors under
`vectors/<track>/`. Generic over exercises and tracks: a track is any key of exercise.json whose value names an
``entry``."""

from __future__ import annotations

import json
import re
from pathlib import Path


class KitUsageError(Exception):
    """Bad usage or unusable input: one line on stderr, exit 2."""


def tracks_of(meta: dict) -> dict[str, dict]:
    """Every track: a key whose value names an ``entry`` (a function or a class) or, for a track of several
    plain functions (``"style": "functions"``), its ``functions``."""
    return {k: v for k, v in meta.items() if isinstance(v, dict) and ("entry" in v or "functions" in v)}


def entries(spec: dict) -> list[str]:
    return list(spec["functions"]) if "functions" in spec else [spec["entry"]]


def names(root: Path) -> list[str]:
    return sorted(p.parent.name for p in root.glob("*/exercise.json"))


def load(root: Path, name: str) -> dict:
    path = root / name / "exercise.json"
    if not path.is_file():
        known = names(root)
        import difflib

        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f"; choose one of: {', '.join(known)}"
        raise KitUsageError(f"unknown exercise {name!r}{hint}")
    return json.loads(path.read_text(encoding="utf-8"))


def detect_track(source: str, meta: dict, requested: str = "auto") -> str:
    """The track whose entry point the file defines (`def`, `class` or an assignment at the top); when several
    tracks share the entry's name, a file that imports torch is the torch track."""
    tracks = tracks_of(meta)
    if requested != "auto":
        if requested not in tracks:
            raise KitUsageError(f"exercise {meta['name']!r} has no track {requested!r}; choose {', '.join(tracks)}")
        return requested
    defined = [t for t, spec in tracks.items() if any(
        re.search(rf"^(?:(?:def|class)\s+{re.escape(e)}\b|{re.escape(e)}\s*=)", source, re.M) for e in entries(spec))]
    imports_torch = re.search(r"^\s*(?:import|from)\s+torch\b", source, re.M) is not None
    if len(defined) == 1:
        return defined[0]
    pool = defined or list(tracks)
    if "torch" in pool and imports_torch:
        return "torch"
    return next((t for t in pool if t != "torch"), pool[0])
