"""First-order, AST-level mutation operators, shared by the benchmark audit and the fix-task builder.

One change per mutant (the tables are `BINARY_SWAPS`, `COMPARE_SWAPS`, `BOOL_SWAPS`):

- ``delete``: a simple statement becomes ``pass`` (not ``pass`` itself, docstrings or other
  bare constants; not a def, class or block);
- ``negate``: the test ``c`` of an if, while, ternary or assert becomes ``not c``;
- ``constant``: an int or float ``c`` becomes ``c + 1`` (0 -> 1), True <-> False, a non-empty
  str becomes "" and "" becomes "x"; None, bytes, docstrings, annotations and f-string text
  are left alone;
- ``operator``: + <-> -, * <-> /, // -> *, % -> //, ** -> *, << <-> >>, & <-> |, ^ -> |
  (binary and augmented assignment); < <-> <=, > <-> >=, == <-> !=, is <-> is not,
  in <-> not in (each operator of a chained comparison apart); and <-> or.

A `Site` is one such change, applied in place (`applied`) and undone, so one parsed tree serves
every mutant of a program.
"""

from __future__ import annotations

import ast
import contextlib
import io
import random
import tokenize
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

OPERATORS = ("delete", "negate", "constant", "operator")

BINARY_SWAPS: dict[type[ast.AST], type[ast.AST]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitOr,
}
COMPARE_SWAPS: dict[type[ast.AST], type[ast.AST]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
BOOL_SWAPS: dict[type[ast.AST], type[ast.AST]] = {ast.And: ast.Or, ast.Or: ast.And}

BLOCKS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    *((ast.TryStar, ast.Match) if hasattr(ast, "TryStar") else (ast.Match,)),
)


@dataclass(frozen=True)
class Site:
    """A mutation: replace `getattr(nodes[node], field)` (or its `[key]`) by `change(old)`."""

    node: int
    field: str
    key: int | None
    change: Callable[[Any], Any]
    operator: str
    line: int
    statement_line: int


def preorder(tree: ast.AST) -> list[ast.AST]:
    """Every node in a fixed order, so a site's index means the same node on every walk."""
    nodes, stack = [], [tree]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return nodes


def first_line(stmt: ast.stmt) -> int:
    """The line coverage.py numbers a statement by: a decorated def starts at its first decorator."""
    decorators = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def is_bare_constant(stmt: ast.AST) -> bool:
    """A docstring or other constant statement: deleting or changing it changes nothing testable."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _mutated_constant(value: Any) -> tuple[bool, Any]:
    if isinstance(value, bool):
        return True, not value
    if isinstance(value, int | float):
        return True, value + 1
    if isinstance(value, str):
        return True, "" if value else "x"
    return False, None


def _replaced_by(value: Any) -> Callable[[Any], Any]:
    return lambda _old: value


def mutation_context(tree: ast.Module) -> tuple[dict[int, int], set[int]]:
    """Per node id: the first line of its enclosing statement; and the ids never mutated
    (annotations, docstrings and bare constants, f-string text)."""
    statement_of: dict[int, int] = {}
    frozen: set[int] = set()

    def visit(node: ast.AST, stmt_line: int, skip: bool) -> None:
        if isinstance(node, ast.stmt):
            stmt_line = first_line(node)
        statement_of[id(node)] = stmt_line
        if skip:
            frozen.add(id(node))
        for name, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST):
                    child_skip = (
                        skip
                        or name in ("annotation", "returns")
                        or (isinstance(node, ast.JoinedStr) and isinstance(child, ast.Constant))
                        or is_bare_constant(node)
                    )
                    visit(child, stmt_line, child_skip)

    visit(tree, 1, False)
    return statement_of, frozen


def mutation_sites(tree: ast.Module, nodes: list[ast.AST]) -> list[Site]:
    """Every first-order mutation of `tree` the operator table allows, in node order."""
    statement_of, frozen = mutation_context(tree)
    sites: list[Site] = []

    def add(i: int, name: str, key: int | None, change: Callable[[Any], Any], op: str, line: int) -> None:
        sites.append(Site(i, name, key, change, op, line, statement_of[id(nodes[i])]))

    for i, node in enumerate(nodes):
        if id(node) in frozen:
            continue
        for name, value in ast.iter_fields(node):  # delete: a simple statement of any body
            if isinstance(value, list) and value and all(isinstance(s, ast.stmt) for s in value):
                for k, stmt in enumerate(value):
                    if not isinstance(stmt, (ast.Pass, *BLOCKS)) and not is_bare_constant(stmt):
                        line = first_line(stmt)
                        sites.append(Site(i, name, k, lambda _old: ast.Pass(), "delete", line, line))
        if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            add(i, "test", None, lambda old: ast.UnaryOp(ast.Not(), old), "negate", node.test.lineno)
        if isinstance(node, ast.Constant):
            ok, new = _mutated_constant(node.value)
            if ok:
                add(i, "value", None, _replaced_by(new), "constant", node.lineno)
        if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in BINARY_SWAPS:
            add(i, "op", None, lambda old: BINARY_SWAPS[type(old)](), "operator", node.lineno)
        if isinstance(node, ast.BoolOp):
            add(i, "op", None, lambda old: BOOL_SWAPS[type(old)](), "operator", node.lineno)
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in COMPARE_SWAPS:
                    add(i, "ops", k, lambda old: COMPARE_SWAPS[type(old)](), "operator", node.lineno)
    return sites


@contextlib.contextmanager
def applied(nodes: list[ast.AST], site: Site) -> Iterator[tuple[Any, Any]]:
    """Apply `site` to the tree in place for the duration of the block; yields (old, new)."""
    holder = nodes[site.node]
    current = getattr(holder, site.field)
    old = current[site.key] if site.key is not None else current
    new = site.change(old)
    if site.key is not None:
        current[site.key] = new
    else:
        setattr(holder, site.field, new)
    try:
        yield old, new
    finally:
        if site.key is not None:
            current[site.key] = old
        else:
            setattr(holder, site.field, old)


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 80 else text[:77] + "..."


def shown_change(nodes: list[ast.AST], site: Site) -> str:
    """The smallest node that shows the change, as one short line (read before and while applied)."""
    holder = nodes[site.node]
    if site.operator == "delete":
        return _short(getattr(holder, site.field)[site.key])
    return _short(getattr(holder, site.field) if site.operator == "negate" else holder)


def spread(sites: list[Site], cap: int, rng: random.Random) -> list[Site]:
    """At most `cap` sites: round-robin over operators, each cycling over its lines (seeded)."""
    if len(sites) <= cap:
        return list(sites)
    queues: list[list[Site]] = []
    for op in sorted({s.operator for s in sites}):
        by_line: dict[int, list[Site]] = defaultdict(list)
        for s in sites:
            if s.operator == op:
                by_line[s.line].append(s)
        lines = sorted(by_line)
        rng.shuffle(lines)
        for line in lines:
            rng.shuffle(by_line[line])
        queue: list[Site] = []
        while any(by_line.values()):
            queue.extend(by_line[line].pop() for line in lines if by_line[line])
        queues.append(queue)
    rng.shuffle(queues)
    picked: list[Site] = []
    while len(picked) < cap:
        for queue in queues:
            if queue and len(picked) < cap:
                picked.append(queue.pop(0))
    return picked


# Bug patterns of real commits (the fix-task builder's operators beside the audit's):
PATTERNS = ("off_by_one", "flipped_comparison", "swapped_arguments", "missing_branch", "wrong_return")
FLIPS: dict[type[ast.AST], type[ast.AST]] = {
    ast.Lt: ast.Gt,
    ast.Gt: ast.Lt,
    ast.LtE: ast.GtE,
    ast.GtE: ast.LtE,
}


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 1


def _returned_part(value: ast.expr) -> ast.expr | None:
    """What a wrong `return` gives back: part of the right value (`f(x)` -> `x`, `a + b` -> `a`,
    `not c` -> `c`), or None for a plain name."""
    if isinstance(value, ast.Call) and value.args and not isinstance(value.args[0], ast.Starred):
        return value.args[0]
    if isinstance(value, ast.BinOp):
        return value.left
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
        return value.operand
    if isinstance(value, ast.Name | ast.Attribute | ast.Subscript):
        return ast.Constant(None)
    return None


def pattern_sites(tree: ast.Module, nodes: list[ast.AST]) -> list[Site]:
    """Every bug-pattern change of `tree`, in node order:

    - ``off_by_one``: ``x + 1`` / ``x - 1`` becomes ``x``; an int bound of ``range(...)`` or of a
      slice, or an int index, moves down by one (the audit's ``constant`` moves it up);
    - ``flipped_comparison``: < <-> >, <= <-> >= (the audit's ``operator`` keeps the direction);
    - ``swapped_arguments``: the first two positional arguments of a call trade places;
    - ``missing_branch``: an ``if`` loses its ``else`` (or ``elif`` chain), or a guard ``if``
      without one is removed whole;
    - ``wrong_return``: ``return f(x)`` returns ``x``, ``return a + b`` returns ``a``, ``return not c``
      returns ``c``, ``return name`` returns None.
    """
    statement_of, frozen = mutation_context(tree)
    sites: list[Site] = []

    def add(i: int, name: str, key: int | None, change: Callable[[Any], Any], op: str, line: int) -> None:
        sites.append(Site(i, name, key, change, op, line, statement_of[id(nodes[i])]))

    index = {id(node): i for i, node in enumerate(nodes)}
    lowered: set[int] = set()  # int constants already given an off_by_one site
    for i, node in enumerate(nodes):
        if id(node) in frozen:
            continue
        for name, value in ast.iter_fields(node):  # `x + 1` / `x - 1` as a field or a list item
            items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for key, item in items:
                if (
                    isinstance(item, ast.BinOp)
                    and isinstance(item.op, ast.Add | ast.Sub)
                    and _is_one(item.right)
                ):
                    add(i, name, key, lambda old: old.left, "off_by_one", item.lineno)
        bounds: list[ast.AST] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            bounds = list(node.args)
        elif isinstance(node, ast.Slice):
            bounds = [b for b in (node.lower, node.upper) if b is not None]
        elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            bounds = [node.slice]
        for bound in bounds:
            if (
                isinstance(bound, ast.Constant)
                and type(bound.value) is int
                and bound.value > 0  # -1 would be written `-1`, a different tree
                and id(bound) not in lowered
            ):
                lowered.add(id(bound))
                add(index[id(bound)], "value", None, lambda old: old - 1, "off_by_one", bound.lineno)
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in FLIPS:
                    add(i, "ops", k, lambda old: FLIPS[type(old)](), "flipped_comparison", node.lineno)
        if (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
            and ast.dump(node.args[0]) != ast.dump(node.args[1])
        ):
            add(i, "args", None, lambda old: [old[1], old[0], *old[2:]], "swapped_arguments", node.lineno)
        if isinstance(node, ast.If) and node.orelse:
            add(i, "orelse", None, lambda _old: [], "missing_branch", node.lineno)
        for name, value in ast.iter_fields(node):  # a guard `if` without else, removed whole
            if isinstance(value, list) and len(value) > 1 and all(isinstance(s, ast.stmt) for s in value):
                for k, stmt in enumerate(value):
                    if isinstance(stmt, ast.If) and not stmt.orelse:
                        line = first_line(stmt)
                        sites.append(Site(i, name, k, lambda _old: ast.Pass(), "missing_branch", line, line))
        if isinstance(node, ast.Return) and node.value is not None and _returned_part(node.value) is not None:
            add(i, "value", None, _returned_part, "wrong_return", node.lineno)
    return sites


def splice(source: str, tree: ast.Module, nodes: list[ast.AST], site: Site) -> str | None:
    """`source` (the text `tree` was parsed from) with `site`'s change written into it and nothing
    else changed: an operator token replaced, an argument's own text moved, an `else` block's lines
    removed, so no line but the bug's reads differently (a rewritten quote or parenthesis would show
    the model where the bug is). Where no such edit is found, the smallest node the change touches
    is written anew (`ast.unparse`); None when neither parses to the mutated tree."""
    with applied(nodes, site):
        wanted = ast.dump(tree)
    text = _Text(source)
    for edits in _edits(text, nodes, site):
        edited = text.apply(edits)
        if edited is not None and _parses_to(edited, wanted):
            return edited
    return _rewritten(source, tree, nodes, site, wanted)


def _parses_to(text: str, wanted: str) -> bool:
    try:
        return ast.dump(ast.parse(text)) == wanted
    except (SyntaxError, ValueError):
        return False


class _Text:
    """A module's text addressed as ast addresses it: lines from 1, columns in UTF-8 bytes."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()
        self.starts = [0]
        for line in source.encode().splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        return start, self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def of(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode()

    def lines(self, first: int, last: int) -> tuple[int, int]:
        return self.starts[first - 1], self.starts[last]

    def apply(self, edits: list[tuple[int, int, str]]) -> str | None:
        out, at = b"", 0
        for start, end, replacement in sorted(edits):
            if start < at:
                return None
            out += self.data[at:start] + replacement.encode()
            at = end
        return (out + self.data[at:]).decode()


SYMBOLS: dict[type[ast.AST], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^", ast.MatMult: "@", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
    ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
}  # fmt: skip


def _edits(text: _Text, nodes: list[ast.AST], site: Site) -> list[list[tuple[int, int, str]]]:
    """Candidate edits (byte ranges and their new text) that make `site`'s change in place."""
    holder = nodes[site.node]
    value = getattr(holder, site.field)
    old = value[site.key] if site.key is not None else value
    if site.operator == "delete" or (site.operator == "missing_branch" and site.key is not None):
        start, end = text.span(old)
        return [[(start, end, "pass")]]
    if site.operator == "negate":
        start, end = text.span(old)
        return [[(start, end, f"not {text.of(old)}")], [(start, end, f"not ({text.of(old)})")]]
    if isinstance(holder, ast.Constant):
        start, end = text.span(holder)
        return [[(start, end, _constant_text(text.of(holder), site.change(old)))]]
    if site.operator == "swapped_arguments":
        (a0, b0), (a1, b1) = text.span(old[0]), text.span(old[1])
        return [[(a0, b0, text.of(old[1])), (a1, b1, text.of(old[0]))]]
    if site.operator == "missing_branch" and isinstance(holder, ast.If):  # its else/elif lines go
        return [e for e in [_else_lines(text, holder)] if e]
    if site.operator in ("off_by_one", "wrong_return") and isinstance(old, ast.expr):
        new = site.change(old)
        start, end = text.span(old)
        shown = text.of(new) if getattr(new, "end_lineno", None) is not None else ast.unparse(new)
        return [[(start, end, shown)], [(start, end, f"({shown})")]]
    if type(old) in SYMBOLS:  # an operator: its token between the operands
        new_symbol = SYMBOLS[type(site.change(old))] + ("=" if isinstance(holder, ast.AugAssign) else "")
        old_symbol = SYMBOLS[type(old)] + ("=" if isinstance(holder, ast.AugAssign) else "")
        edits = []
        for left, right in _operands(holder, site.key):
            found = _token(text, text.span(left)[1], text.span(right)[0], old_symbol)
            if found is None:
                return []
            edits.append((*found, new_symbol))
        return [edits]
    return []


def _operands(holder: ast.AST, key: int | None) -> list[tuple[ast.AST, ast.AST]]:
    """The (left, right) operands around each token of the operator the site changes."""
    if isinstance(holder, ast.BinOp):
        return [(holder.left, holder.right)]
    if isinstance(holder, ast.AugAssign):
        return [(holder.target, holder.value)]
    if isinstance(holder, ast.Compare) and key is not None:
        return [(holder.left if key == 0 else holder.comparators[key - 1], holder.comparators[key])]
    if isinstance(holder, ast.BoolOp):
        return list(zip(holder.values, holder.values[1:], strict=False))
    return []


def _token(text: _Text, start: int, end: int, symbol: str) -> tuple[int, int] | None:
    """The byte range of `symbol` (an operator, "is not" as two words) between two operands."""
    gap = text.data[start:end].decode()
    words = symbol.split()
    tokens = []
    # the gap's parentheses need not balance: tokenize stops there, and the tokens read so far serve
    with contextlib.suppress(tokenize.TokenError, IndentationError, SyntaxError):
        for token in tokenize.generate_tokens(io.StringIO(gap).readline):
            if token.type in (tokenize.OP, tokenize.NAME):
                tokens.append(token)
    lines = gap.splitlines(keepends=True) or [""]

    def offset(row: int, col: int) -> int:  # tokenize's (row, column in characters) as bytes
        return start + len("".join(lines[: row - 1]).encode()) + len(lines[row - 1][:col].encode())

    for i in range(len(tokens) - len(words) + 1):
        if [t.string for t in tokens[i : i + len(words)]] == words:
            return offset(*tokens[i].start), offset(*tokens[i + len(words) - 1].end)
    return None


def _constant_text(shown: str, value: Any) -> str:
    """The new constant written as the old one was: a string keeps its prefix and quotes."""
    if isinstance(value, str):
        prefix = shown[: len(shown) - len(shown.lstrip("rRbBuUfF"))]
        quote = (
            shown[len(prefix) : len(prefix) + 3]
            if shown[len(prefix) :][:3] in ('"""', "'''")
            else shown[len(prefix)]
        )
        return f"{prefix}{quote}{value}{quote}"
    return repr(value)


def _else_lines(text: _Text, branch: ast.If) -> list[tuple[int, int, str]]:
    """The lines of an `if`'s `else:` (or `elif ...:`) down to its block's last line."""
    body_end = max(getattr(s, "end_lineno", 0) or 0 for s in branch.body)
    last = max(getattr(s, "end_lineno", 0) or 0 for s in branch.orelse)
    for line in range(body_end + 1, branch.orelse[0].lineno + 1):
        start, end = text.lines(line, line)
        if text.data[start:end].decode().lstrip().startswith(("else", "elif")):
            return [(start, text.lines(last, last)[1], "")]
    return []


def _rewritten(source: str, tree: ast.Module, nodes: list[ast.AST], site: Site, wanted: str) -> str | None:
    """`source` with the smallest node `site`'s change touches written anew (`ast.unparse`)."""
    holder = nodes[site.node]
    value = getattr(holder, site.field)
    old = value[site.key] if site.key is not None else value
    target = old if isinstance(old, ast.stmt | ast.expr) else holder  # an operator, a value, a list
    place = [getattr(target, key, None) for key in ("lineno", "col_offset", "end_lineno", "end_col_offset")]
    if not all(isinstance(n, int) for n in place):
        return None
    first, col, last, end_col = (int(n) for n in place if isinstance(n, int))
    with applied(nodes, site) as (_, new):
        text = ast.unparse(new if target is old else holder)
    if isinstance(target, ast.stmt):  # a block's continuation lines at the statement's own indent
        text = text.replace("\n", "\n" + " " * col)
    lines = source.splitlines(keepends=True)
    head = lines[first - 1].encode()[:col].decode()  # ast columns count UTF-8 bytes
    tail = lines[last - 1].encode()[end_col:].decode()
    for candidate in (text, f"({text})"):
        spliced = "".join(lines[: first - 1]) + head + candidate + tail + "".join(lines[last:])
        try:
            if ast.dump(ast.parse(spliced)) == wanted:
                return spliced
        except SyntaxError:
            continue
    return None
