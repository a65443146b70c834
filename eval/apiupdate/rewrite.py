"""Rewrite a program to a modified API, in place in its text (comments and layout kept).

Edits are computed from the AST's positions and applied to the source text:

- R1: every reference to the old name becomes the new one (`len(x)` -> `length(x)`,
  `math.sqrt` -> `math.square_root`, `from math import sqrt` -> `from math import square_root`
  and the local name with it);
- S1: nothing (the old call is valid use);
- S2: `errors="raise"` added to every call (the old behaviour);
- S3: the two swapped positional arguments exchanged at every call;
- S4: `[0]` (or `.value`, the `value` form) read from every call's result.

An API passed as a value (`key=len`) becomes a lambda that calls the new form. What cannot be
rewritten (starred arguments where S3 must swap, an S3 call nested in another's swapped
argument) raises `Unrewritable`, and the builder counts the pair as dropped.
"""

from __future__ import annotations

import ast

from core.benchmarks.apiupdate import Modification
from eval.apiupdate.apis import assigned_names, import_aliases, qualified_name, roots_of


class Unrewritable(ValueError):
    """The program uses the API in a way the rewrite cannot express."""


def _offsets(source: str) -> list[int]:
    """Character offset of each line's start (1-based lines)."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


class _Positions:
    """AST (line, byte column) -> character offset in the text."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = _offsets(source)

    def at(self, line: int, col: int) -> int:
        text = self.lines[line - 1].encode("utf-8")[:col].decode("utf-8", errors="replace")
        return self.starts[line] + len(text)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.at(node.lineno, node.col_offset), self.at(node.end_lineno, node.end_col_offset)


def _apply(source: str, edits: list[tuple[int, int, str]]) -> str:
    edits = sorted(edits, key=lambda e: (e[0], e[1]))
    for (_s1, e1, _), (s2, _, _) in zip(edits, edits[1:], strict=False):
        if s2 < e1:
            raise Unrewritable("two rewrites overlap")
    for start, end, text in reversed(edits):
        source = source[:start] + text + source[end:]
    return source


def _new_reference(mod: Modification, node: ast.expr, source: str, pos: _Positions) -> str:
    """How the rewritten program names the API where `node` named it."""
    if mod.type != "R1":
        return source[slice(*pos.span(node))]
    if isinstance(node, ast.Attribute):
        return f"{source[slice(*pos.span(node.value))]}.{mod.new_name}"
    return mod.new_name


def rewrite(source: str, mod: Modification) -> str:
    """`source` calling `mod.api` the way the modified API wants; Unrewritable when it cannot."""
    tree = ast.parse(source)
    aliases = import_aliases(tree)
    shadowed = assigned_names(tree) - set(aliases)
    pos = _Positions(source)
    edits: list[tuple[int, int, str]] = []
    called: set[int] = set()
    renamed_locals = _rename_from_imports(tree, mod, pos, edits) if mod.type == "R1" else set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and qualified_name(node.func, aliases, shadowed, roots_of(mod.api)) == mod.api
        ):
            called.add(id(node.func))
            edits.extend(_call_edits(node, mod, source, pos, renamed_locals))
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Name, ast.Attribute))
            and isinstance(node.ctx, ast.Load)
            and id(node) not in called
            and qualified_name(node, aliases, shadowed, roots_of(mod.api)) == mod.api
        ):
            edits.append(
                (*pos.span(node), _as_value(mod, _reference(node, mod, source, pos, renamed_locals)))
            )
    return _apply(source, edits)


def _reference(node: ast.expr, mod: Modification, source: str, pos: _Positions, renamed: set[str]) -> str:
    if isinstance(node, ast.Name) and node.id in renamed:
        return mod.new_name
    return _new_reference(mod, node, source, pos)


def _rename_from_imports(tree: ast.AST, mod: Modification, pos: _Positions, edits: list) -> set[str]:
    """`from m import old` -> `from m import new`; returns the local names that now change too."""
    renamed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == mod.module and node.level == 0:
            for alias in node.names:
                if alias.name != mod.name:
                    continue
                start, end = pos.span(alias)
                edits.append((start, start + len(alias.name), mod.new_name))
                if not alias.asname:
                    renamed.add(alias.name)
    return renamed


def _call_edits(
    node: ast.Call, mod: Modification, source: str, pos: _Positions, renamed: set[str]
) -> list[tuple[int, int, str]]:
    edits = []
    if mod.type == "R1":
        edits.append((*pos.span(node.func), _reference(node.func, mod, source, pos, renamed)))
    elif mod.type == "S2":
        edits.append(_keyword_insert(node, mod, source, pos))
    elif mod.type == "S3":
        edits.extend(_swap(node, source, pos))
    elif mod.type == "S4":
        end = pos.span(node)[1]
        edits.append((end, end, mod.result_read))
    return edits


def _keyword_insert(node: ast.Call, mod: Modification, source: str, pos: _Positions) -> tuple[int, int, str]:
    end = pos.span(node)[1] - 1  # the closing parenthesis
    if source[end] != ")":
        raise Unrewritable(f"cannot find the closing parenthesis of {ast.unparse(node)}")
    before = source[:end].rstrip()
    keyword = f'{mod.param}="raise"'
    if not node.args and not node.keywords:
        return end, end, keyword
    if len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.GeneratorExp):
        # `sum(x for x in y)`: the generator shares the call's parentheses; it needs its own now
        start = source.index("(", pos.span(node.func)[1]) + 1
        return start, end, f"({source[start:end].strip()}), {keyword}"
    return end, end, keyword if before.endswith(",") else f", {keyword}"


def _swap(node: ast.Call, source: str, pos: _Positions) -> list[tuple[int, int, str]]:
    if len(node.args) < 2 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
        raise Unrewritable(f"S3 needs two plain positional arguments: {ast.unparse(node)}")
    first, second = (pos.span(a) for a in node.args[:2])
    return [
        (*first, source[slice(*second)]),
        (*second, source[slice(*first)]),
    ]


def _as_value(mod: Modification, name: str) -> str:
    """The API passed as a value (`key=len`), as the new API must be called."""
    if mod.type == "R1":
        return name
    if mod.type == "S2":
        return f'(lambda *a, **k: {name}(*a, {mod.param}="raise", **k))'
    if mod.type == "S3":
        return f"(lambda a, b, *r, **k: {name}(b, a, *r, **k))"
    if mod.type == "S4":
        return f"(lambda *a, **k: {name}(*a, **k){mod.result_read})"
    return name
