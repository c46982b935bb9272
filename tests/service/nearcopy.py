"""Near-copies of a Python file, as someone hiding a copy would make them: local variables renamed (the graded
function's parameters keep their names, so the copy still passes), two independent
neighbouring statements swapped (and two top-level functions, where there are two), comments reworded."""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize


def _assigned_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_"):
            names.add(node.name)      # private helpers; the graded entry points keep their names
    return {n for n in names if not keyword.iskeyword(n) and not hasattr(builtins, n) and n != "self"}


def _swap_lines(text: str, first: ast.stmt, second: ast.stmt) -> str:
    lines = text.splitlines(keepends=True)
    a = lines[first.lineno - 1:first.end_lineno]
    b = lines[second.lineno - 1:second.end_lineno]
    return "".join(lines[:first.lineno - 1] + b + a + lines[second.end_lineno:])


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def reorder(text: str) -> str:
    """Swap the first two neighbouring single-line statements of a function body that do not depend on each
    other (or, failing that, the first two top-level functions)."""
    tree = ast.parse(text)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for s1, s2 in zip(fn.body, fn.body[1:]):
            if (isinstance(s1, (ast.Assign, ast.AnnAssign)) and isinstance(s2, (ast.Assign, ast.AnnAssign))
                    and s1.lineno == s1.end_lineno and s2.lineno == s2.end_lineno
                    and not (_writes(s1) & (_reads(s2) | _writes(s2))) and not (_writes(s2) & _reads(s1))):
                return _swap_lines(text, s1, s2)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return _swap_lines(text, fns[0], fns[1]) if len(fns) > 1 else text


def rename_and_recomment(text: str) -> str:
    names = _assigned_names(ast.parse(text))
    mapping = {n: f"{n[:1]}_{i}_tmp" if len(n) <= 2 else f"my_{n.lower()}_val" for i, n in enumerate(sorted(names))}
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in mapping:
            tok = tok._replace(string=mapping[tok.string])
        elif tok.type == tokenize.COMMENT:
            tok = tok._replace(string="# note: " + tok.string.lstrip("# ")[::-1])
        out.append(tok)
    return tokenize.untokenize(out)


def near_copy(text: str) -> str:
    copy = rename_and_recomment(reorder(text))
    ast.parse(copy)
    return '"""My own solution."""\n' + copy
