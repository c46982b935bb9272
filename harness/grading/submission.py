"""Reading and vetting a submission file on the host (never executing it), and detecting its track."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
from pathlib import Path

from gradekit.check import LIMIT_TEXT, MAX_SOURCE_BYTES as MAX_BYTES  # the one limit (the kit's too), one wording
from harness.core import pysource
from harness.core.errors import SubmissionError
from harness.core.exercises import Exercise

BANNED_APIS = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
               "MultiheadAttention": "nn.MultiheadAttention",
               "multi_head_attention_forward": "F.multi_head_attention_forward"}


@dataclasses.dataclass
class Submission:
    path: Path
    text: str
    sha256: str
    size: int

    def to_dict(self) -> dict:
        return {"path": str(self.path), "sha256": self.sha256, "size": self.size}


def load_submission(path: str | Path) -> Submission:
    p = Path(path)
    if not p.exists():
        raise SubmissionError(f"submission {str(p)!r} does not exist")
    if p.is_dir():
        raise SubmissionError(f"submission {str(p)!r} is a directory, expected a .py file")
    if not p.is_file():
        raise SubmissionError(f"submission {str(p)!r} is not a regular file")
    size = p.stat().st_size
    if size > MAX_BYTES:
        raise SubmissionError(f"submission {str(p)!r} is {size:,} bytes; a submission may be at most {LIMIT_TEXT}")
    data = p.read_bytes()
    if b"\x00" in data:
        raise SubmissionError(f"submission {str(p)!r} is a binary file (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError(f"submission {str(p)!r} is not UTF-8 text (byte {exc.start})") from None
    return Submission(p, text, hashlib.sha256(data).hexdigest(), size)


# ast.parse raises RecursionError or MemoryError (not SyntaxError) on a few KB of `1+1+1...` or `not not ...`
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)


def _defined_names(text: str) -> tuple[set[str], set[str]]:
    try:
        tree = pysource.parse(text)
    except PARSE_ERRORS:
        funcs = set(re.findall(r"^\s*def\s+(\w+)", text, re.M))
        classes = set(re.findall(r"^\s*class\s+(\w+)", text, re.M))
        return funcs, classes
    funcs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:  # `mha = something` also defines the entry point
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    funcs.add(t.id)
                    classes.add(t.id)
    return funcs, classes


def detect_track(sub: Submission, exercise: Exercise) -> str:
    """The exercise's only track when it has one; else numpy if the file defines the NumPy entry function, torch
    if it defines the torch class; when both tracks define a function of the same name (a function-style torch
    track), a file that imports torch is torch."""
    if len(exercise.tracks) == 1:
        return exercise.default_track
    funcs, classes = _defined_names(sub.text)
    has_np = exercise.entry("numpy") in funcs
    has_torch = exercise.entry("torch") in (funcs if exercise.torch.get("style") == "function" else classes)
    if has_torch and not has_np:
        return "torch"
    if has_np and not has_torch:
        return "numpy"
    if re.search(r"^\s*(import|from)\s+torch", sub.text, re.M):
        return "torch"
    return "numpy"


def banned_api_uses(text: str) -> list[str]:
    """Best-effort static scan of names and attributes (not comments or strings) for banned attention APIs."""
    try:
        tree = pysource.parse(text)
    except PARSE_ERRORS:
        return _banned_tokens(text)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.update(node.name.split("."))
            if node.asname:
                used.add(node.asname)
    return sorted(label for name, label in BANNED_APIS.items() if name in used)


def _banned_tokens(text: str) -> list[str]:
    """The same scan over NAME tokens, for a file the AST parser refuses (the tokenizer does not recurse)."""
    import io
    import tokenize

    used = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string in BANNED_APIS:
                used.add(tok.string)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return sorted(BANNED_APIS[name] for name in used)
