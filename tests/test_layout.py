"""The layout: each folder of harness/ is a step of a submission's journey, and imports run one way.

    cli -> service -> batch -> grading -> session -> sandbox -> core
    cli -> service -> reports --------------------------------> core
    cli -> kit -> core;  kit -> gradekit/ (the candidate kit's code: the standard library and NumPy only)
    grading -> graders/ -> core;  worker/ imports nothing of the grader (it runs inside the sandbox)
    session, sandbox -> worker/wire.py (the wire format and argument layouts both sides share)
    harness/__init__.py (the package's face: harness.grade, __version__) -> grading, core; imported by nothing
    of the house (the version lives in core.version)

The test reads every module's imports (function-level ones included) with the ast module and checks each
against the layer it comes from; and that no cycle runs through module-level imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# what each part may import, besides itself. "face" is the top-level `harness` package (harness/__init__.py):
# __version__ (from core.version) and a lazy `harness.grade` re-export from grading; no part imports it.
ALLOWED = {
    "face": {"core", "grading"},
    "core": set(),
    "worker": set(),
    "sandbox": {"core", "worker"},
    "session": {"core", "worker", "sandbox"},
    "grading": {"core", "worker", "sandbox", "session", "graders"},
    "reports": {"core"},
    "batch": {"core", "grading"},
    "service": {"core", "worker", "sandbox", "session", "grading", "reports", "batch"},
    "cli": {"core", "worker", "sandbox", "session", "grading", "reports", "batch", "service", "kit"},
    "launch": {"core", "grading", "cli"},   # harness/launch.py: the `grade` process's first step, above the CLI
    "kit": {"core"},
    "graders": {"core"},
}


def part_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "graders":
        return "graders"
    if module == "harness":
        return "face"
    if parts[0] == "harness" and len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return None


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, *, top_level_only: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in the file; ``from X import y`` yields X.y instead of X when
    y is a module of the project (``from harness.core import sidecar``)."""
    tree = ast.parse(path.read_text(), str(path))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names]
            modules = [m for m in subs if _module_file(m) is not None]
            if len(modules) < len(subs):  # names from the module itself, not only its submodules
                found.append((node.lineno, target))
            found += [(node.lineno, m) for m in modules]
    return found


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def project_files() -> list[Path]:
    files = [p for top in ("harness", "graders") for p in (ROOT / top).rglob("*.py")]
    return sorted(p for p in files if "__pycache__" not in p.parts)


def test_every_import_runs_down_the_layers():
    wrong = []
    for path in project_files():
        me = part_of(module_name(path))
        for line, target in imports(path):
            them = part_of(target)
            if me is None or them is None or them == me:
                continue
            if them not in ALLOWED[me]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {me} imports {target} ({them})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_worker_imports_nothing_of_the_grader():
    """It runs inside the sandbox with only the standard library, NumPy (torch) and wire.py beside it."""
    for path in (ROOT / "harness" / "worker").glob("*.py"):
        if path.name == "__init__.py":
            continue
        for line, target in imports(path):
            assert not target.startswith(("harness", "graders")), f"{path.name}:{line} imports {target}"


def test_the_candidate_kit_imports_nothing_of_the_grader():
    """gradekit/ becomes the candidate kit: the standard library, NumPy, torch (the torch track) and itself; the
    one way up is its CLI handing the grader's own commands to the full package when that is installed."""
    import sys

    allowed = set(sys.stdlib_module_names) | {"numpy", "torch", "gradekit"}
    for path in (ROOT / "gradekit").glob("*.py"):
        for line, target in imports(path):
            if path.name == "cli.py" and target.startswith("harness.cli"):
                continue
            assert target.split(".")[0] in allowed, f"gradekit/{path.name}:{line} imports {target}"


def test_graders_import_only_the_core():
    for path in (ROOT / "graders").rglob("*.py"):
        for line, target in imports(path):
            if target.startswith("harness"):
                assert target.startswith("harness.core"), f"{path.relative_to(ROOT)}:{line} imports {target}"


def test_no_cycle_through_module_level_imports():
    graph: dict[str, set[str]] = {}
    for path in project_files():
        name = module_name(path)
        graph[name] = {t for _, t in imports(path, top_level_only=True)
                       if t != name and _module_file(t) is not None and t.startswith(("harness", "graders"))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_version_lives_low_and_nothing_imports_the_face():
    """Every part reads the version from core; ``import harness`` (the face) is for users, not for the house."""
    import harness
    from harness.core.version import __version__

    assert harness.__version__ == __version__
    face = [f"{path.relative_to(ROOT)}:{line}" for path in project_files() if module_name(path) != "harness"
            for line, target in imports(path) if target == "harness"]
    assert face == [], "imports of the package's face from inside the house: " + ", ".join(face)


def test_the_checker_catches_a_wrong_import(tmp_path, monkeypatch):
    """The rule bites: a renderer reaching up into batch is reported."""
    fake = ROOT / "harness" / "reports" / "_layout_probe.py"
    fake.write_text("from harness.batch.files import outcome_of\n")
    try:
        try:
            test_every_import_runs_down_the_layers()
        except AssertionError as exc:
            assert "reports imports harness.batch.files (batch)" in str(exc)
        else:
            raise AssertionError("the layout test did not notice reports -> batch")
    finally:
        fake.unlink()
