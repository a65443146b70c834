"""Deterministic failure classes of novel-API programs (NovelAPIBench's six, plus OK).

An `Attempt` is one program a model completed, the target API it had to call (its qualified
name and every alias path of the same object), the target's signature text, the sandbox's
verdict and stderr, and the spy record: one ``{"args": [repr, ...], "kwargs": {name: repr}}``
per call of the target (the spy wraps every alias and records before calling through).
`classify` assigns exactly one class from static analysis of the code (``compile()``, an AST
resolver of imports/attributes/assignments) and the run's last exception. Rules, in precedence
order — the first that applies wins:

1. **OK** — ``attempt.passed``.
2. **WrongSyntax** — ``compile(code)`` fails (SyntaxError, IndentationError, ValueError), the
   code is blank, or the sandbox status is ``syntax_error`` or ``empty``.
3. **WrongImport** — the last exception is
   a. ``ImportError`` / ``ModuleNotFoundError``; or
   b. ``AttributeError: module 'M' has no attribute ...`` where M belongs to the target's
      library (the top-level package of the target or of an alias); or
   c. ``NameError: name 'N' is not defined`` where N is the target's (or an alias') leaf name
      or the library's top-level package (the import was forgotten); or
   d. (static, only when the spy recorded no call) the code imports or references the target's
      leaf name through a library path that is not one of the aliases (``from novlib import
      slugify`` when only ``novlib.text.slugify`` exists) — even if a fallback hid the failure.
4. **WrongAPISelection** — the spy recorded no call of the target and the code never names
   the target through any alias (calls, ``f = novlib.text.slugify``, ``map(slugify, ...)``,
   ``getattr(mod, "slugify")``): the program used other APIs or reimplemented it. (A program
   that names the target but never reached the call — it crashed or timed out first, which
   also loses the at-exit spy record — selected the right API and goes on to rules 5-7.)
5. **WrongParam** — the target was called with arguments its signature rejects:
   a. the last exception is a ``TypeError`` of argument binding (``unexpected keyword
      argument``, ``missing N required ... argument``, ``takes N positional arguments but M
      were given``, ``multiple values for argument``, ...) naming the target's function (or
      naming none while the target was called); or
   b. a recorded call does not bind to ``attempt.signature``; or
   c. a recorded call's *argument shape* equals no reference call's shape. The shape is the set
      of explicitly passed parameter names after binding to the signature (``*args`` entries
      count one each, ``**kwargs`` entries by key; a default passed explicitly counts as
      passed), so it captures both names and arity; without a signature it is
      ``{#0, #1, ..., kw names}``. Skipped when there are no reference calls.
6. **WrongShapeDtype** — the last exception is a value type/shape/dtype mismatch:
   ``TypeError`` with a value-type message (``unsupported operand``, ``not subscriptable``,
   ``is not iterable``, ``can't multiply sequence``, ``must be str, not``, ``can only
   concatenate``, ``indices must be integers``, ``not supported between instances``,
   ``bytes-like object``, ``unhashable type``, ``has no len()``, ...); ``ValueError`` with
   ``shape``/``dtype``/``broadcast``/``dimension``/``could not convert``/``invalid literal``/
   ``values to unpack``/``length``; numpy's ``AxisError``/``UFuncTypeError``/
   ``DTypePromotionError``; ``IndexError: too many indices`` / ``out of bounds for axis``;
   ``AttributeError: '<builtin value type>' object has no attribute`` (``str``, ``list``,
   ``int``, ``bytes``, ``ndarray``, ... — not ``NoneType``); or an ``AssertionError`` that
   follows the harness convention below with two different types.
7. **WrongLogic** — everything else: the target was called acceptably and the result is wrong
   (same-type assertion failures, other exceptions, timeouts/memory/kills of a program that
   names the target, sandbox errors).

Harness assertion convention (rule 6): when a test compares a result with its expectation it
raises ``AssertionError: expected <repr> (<type>), got <repr> (<type>)``; ``<type>`` is any
text without newlines (e.g. ``str``, ``ndarray float64 (3,)``) and the two are compared as
strings. ``expected <type>: <repr>, got <type>: <repr>`` is accepted too.

Tracebacks are parsed from stderr (`parse_exception`): the last ``Traceback (most recent call
last):`` block wins (so of chained exceptions the last one), its first unindented line is
``Type: message`` (continuation lines join the message); a SyntaxError printed without a
header is found as the last unindented ``...Error: message`` line.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass

from core.signatures import parse_signature

CLASSES = (
    "OK",
    "WrongSyntax",
    "WrongImport",
    "WrongAPISelection",
    "WrongParam",
    "WrongShapeDtype",
    "WrongLogic",
)


@dataclass(frozen=True)
class Attempt:
    """One program and everything observed about its run (see the module docstring)."""

    code: str
    target: str
    aliases: tuple[str, ...]
    signature: str | None
    passed: bool
    status: str
    stderr: str
    calls: tuple[dict, ...] = ()
    reference_calls: tuple[dict, ...] = ()


@dataclass(frozen=True)
class ExceptionInfo:
    """The last exception of a traceback: its type as printed (maybe dotted) and its message."""

    type: str
    message: str

    @property
    def name(self) -> str:
        """The type's unqualified name (``numpy.exceptions.AxisError`` -> ``AxisError``)."""
        return self.type.rsplit(".", 1)[-1]

    @property
    def line(self) -> str:
        """``Type: first message line``, for reasons."""
        first = self.message.splitlines()[0] if self.message else ""
        return _clip(f"{self.type}: {first}" if first else self.type)


# ----------------------------------------------------------------------------- traceback parsing
_HEADERS = ("Traceback (most recent call last):", "Exception Group Traceback (most recent call last):")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: ?(.*))?$")
_EXC_NAME = re.compile(r"(Error|Exception|Warning|Exit|Interrupt|Iteration)$")


def parse_exception(stderr: str) -> ExceptionInfo | None:
    """The last exception in `stderr`, or None when there is no recognisable one."""
    lines = stderr.splitlines()
    header = max((i for i, line in enumerate(lines) if line.strip(" |+") in _HEADERS), default=None)
    if header is not None:
        # An exception group's sub-tracebacks are drawn behind a "    | " margin: strip it.
        text = lines[header]
        margin = text[: len(text) - len(text.lstrip(" |+"))].replace("+", "|")
        block = []
        for line in lines[header + 1 :]:
            if margin and not line.startswith(margin):
                break
            block.append(line[len(margin) :])
        for i, line in enumerate(block):
            if not line or line[0].isspace():
                continue
            match = _EXC_LINE.match(line)
            if match:
                return _info(match, block[i + 1 :])
        return None
    # No header: a compile error of the main program (indented location lines, then the type).
    for i in range(len(lines) - 1, -1, -1):
        match = _EXC_LINE.match(lines[i])
        if match and _EXC_NAME.search(match.group(1)):
            return _info(match, lines[i + 1 :])
    return None


def _info(match: re.Match, rest: list[str]) -> ExceptionInfo:
    message = "\n".join([match.group(2) or "", *rest]).strip()
    return ExceptionInfo(match.group(1), message)


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------- static analysis
class _Names:
    """Flat (scope-blind, source-ordered) resolution of local names to qualified paths."""

    def __init__(self, tree: ast.AST, known: set[str]) -> None:
        self.bound: dict[str, str] = {}
        self.star: list[str] = []
        self.known = known
        self.imported: list[str] = []  # every imported path (`import a.b` -> a.b, `from a import b` -> a.b)
        self.defined: set[str] = set()
        kinds = (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        nodes = [n for n in ast.walk(tree) if isinstance(n, kinds)]
        for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
            self._bind(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.imported.append(alias.name)
                if alias.asname:
                    self.bound[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    self.bound[root] = root
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module:
                return
            for alias in node.names:
                if alias.name == "*":
                    self.star.append(node.module)
                    continue
                path = f"{node.module}.{alias.name}"
                self.imported.append(path)
                self.bound[alias.asname or alias.name] = path
        elif isinstance(node, ast.Assign):
            value = self.resolve(node.value)
            for target in node.targets:
                if isinstance(target, ast.Name):
                    if value is None:
                        self.bound.pop(target.id, None)
                    else:
                        self.bound[target.id] = value
        else:  # a def or class shadows whatever the name was bound to
            self.defined.add(node.name)
            self.bound.pop(node.name, None)

    def resolve(self, expr: ast.AST) -> str | None:
        if isinstance(expr, ast.Name):
            if expr.id in self.bound:
                return self.bound[expr.id]
            for module in self.star:
                if f"{module}.{expr.id}" in self.known:
                    return f"{module}.{expr.id}"
            return None
        if isinstance(expr, ast.Attribute):
            base = self.resolve(expr.value)
            return f"{base}.{expr.attr}" if base else None
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id == "getattr"
            and len(expr.args) >= 2
            and isinstance(expr.args[1], ast.Constant)
            and isinstance(expr.args[1].value, str)
        ):
            base = self.resolve(expr.args[0])
            return f"{base}.{expr.args[1].value}" if base else None
        return None


@dataclass(frozen=True)
class _Static:
    references_target: bool
    library_calls: tuple[str, ...]  # library APIs called, other than the target, in source order
    wrong_paths: tuple[str, ...]  # library paths ending in the target's name that are no alias
    defines_target_name: bool


def _analyse(tree: ast.AST, attempt: Attempt) -> _Static:
    aliases = set(attempt.aliases) | {attempt.target}
    roots = {a.split(".")[0] for a in aliases}
    leaves = {a.rsplit(".", 1)[-1] for a in aliases}
    names = _Names(tree, aliases)
    references = False
    calls: list[str] = []
    paths: list[str] = list(names.imported)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = names.resolve(node.func)
            if func and func.split(".")[0] in roots and func not in aliases and func not in calls:
                calls.append(func)
        if isinstance(node, ast.Call) or (
            isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
        ):
            path = names.resolve(node)
            if path is None:
                continue
            references = references or path in aliases
            if not isinstance(node, ast.Name):
                paths.append(path)

    def wrong(path: str) -> bool:
        return (
            path.split(".")[0] in roots
            and path.rsplit(".", 1)[-1] in leaves
            and path not in aliases
            and not any(a.startswith(path + ".") for a in aliases)
        )

    wrong_paths = tuple(dict.fromkeys(p for p in paths if wrong(p)))
    defines = bool(names.defined & leaves)
    return _Static(references, tuple(calls), wrong_paths, defines)


# ----------------------------------------------------------------------------- signatures and calls
def call_shape(call: dict, signature: inspect.Signature | None) -> frozenset[str]:
    """The explicitly passed parameters of a recorded call (rule 5c); TypeError if it does not bind."""
    args = list(call.get("args") or [])
    kwargs = dict(call.get("kwargs") or {})
    if signature is None:
        return frozenset([f"#{i}" for i in range(len(args))] + list(kwargs))
    bound = signature.bind(*args, **kwargs)
    shape: set[str] = set()
    for name, value in bound.arguments.items():
        param = signature.parameters[name]
        if param.kind is param.VAR_POSITIONAL:
            shape.update(f"*{name}[{i}]" for i in range(len(value)))
        elif param.kind is param.VAR_KEYWORD:
            shape.update(f"**{key}" for key in value)
        else:
            shape.add(name)
    return frozenset(shape)


def _render_call(name: str, call: dict) -> str:
    parts = [*(call.get("args") or []), *(f"{k}={v}" for k, v in (call.get("kwargs") or {}).items())]
    return _clip(f"{name}({', '.join(parts)})", 100)


def _render_shape(shape: frozenset[str], signature: inspect.Signature | None) -> str:
    order = list(signature.parameters) if signature else []

    def key(item: str):
        base = item.lstrip("*#").split("[")[0]
        return (order.index(base) if base in order else len(order), item)

    return "(" + ", ".join(sorted(shape, key=key)) + ")"


# ----------------------------------------------------------------------------- exception rules
_BINDING = re.compile(
    r"unexpected keyword argument|missing \d+ required (?:positional |keyword-only )?arguments?"
    r"|takes (?:from \d+ to \d+|\d+|at most \d+|at least \d+|exactly \d+|no) (?:positional |keyword )?arguments?"
    r"|multiple values for (?:keyword )?argument|positional-only arguments passed as keyword"
    r"|is an invalid keyword argument|given by name \(.*\) and position"
)
_FUNC = re.compile(r"([\w.<>]+)\(\)")
_TYPE_VALUE = re.compile(
    r"unsupported operand|not subscriptable|is not iterable|can't multiply sequence|must be [\w .,]+, not "
    r"|can only concatenate|can't concat|indices must be integers|not supported between instances"
    r"|bytes-like object|unhashable type|has no len\(\)|cannot be interpreted as an? "
    r"|sequence item \d+: expected|expected str, bytes|object is not callable|only \w+ can be"
    r"|argument must be|cannot convert|object cannot be|not a mapping|bad operand type"
)
_VALUE_SHAPE = re.compile(
    r"shape|dtype|broadcast|dimension|ndim|could not convert|invalid literal|values to unpack"
    r"|length|array element with a sequence|cannot reshape|size \d+",
    re.IGNORECASE,
)
_SHAPE_TYPES = {"AxisError", "UFuncTypeError", "_UFuncNoLoopError", "DTypePromotionError"}
_SHAPE_TYPES |= {"_UFuncTypeError", "_UFuncInputCastingError", "_UFuncOutputCastingError"}
_INDEX_SHAPE = re.compile(r"too many indices|out of bounds for axis|only integers, slices")
_VALUE_TYPES = (
    "str|bytes|bytearray|int|float|complex|bool|list|tuple|dict|set|frozenset|range|generator|map|filter"
    "|zip|dict_keys|dict_values|dict_items|ndarray|Series|DataFrame|Index|matrix|memoryview"
)
_ATTR_ON_VALUE = re.compile(rf"^'({_VALUE_TYPES})' object has no attribute")
_TYPE_TEXT = r"[^()\n]*(?:\([^()\n]*\)[^()\n]*)*"
_ASSERT_TYPES = (
    re.compile(
        rf"expected (?P<e>.*?) \((?P<et>{_TYPE_TEXT})\), got (?P<g>.*) \((?P<gt>{_TYPE_TEXT})\)\s*$", re.S
    ),
    re.compile(r"expected (?P<et>[\w.\[\], ]+?): (?P<e>.*?),? got (?P<gt>[\w.\[\], ]+?): (?P<g>.*)$", re.S),
)


def _binding_error(exc: ExceptionInfo, leaves: set[str], called: bool) -> bool:
    if exc.name != "TypeError" or not _BINDING.search(exc.message):
        return False
    named = _FUNC.search(exc.message)
    if not named:
        return called
    parts = named.group(1).split(".")
    if parts[-1] in leaves:
        return True
    # a class target: Cls.__init__() / __init__()
    return parts[-1] in {"__init__", "__new__", "__call__"} and (len(parts) == 1 or parts[-2] in leaves)


def _shape_dtype(exc: ExceptionInfo) -> str | None:
    """Why `exc` is a value type/shape/dtype mismatch (rule 6), or None."""
    if exc.name in _SHAPE_TYPES:
        return exc.line
    if exc.name == "TypeError" and _TYPE_VALUE.search(exc.message) and not _BINDING.search(exc.message):
        return exc.line
    if exc.name == "ValueError" and _VALUE_SHAPE.search(exc.message):
        return exc.line
    if exc.name == "IndexError" and _INDEX_SHAPE.search(exc.message):
        return exc.line
    if exc.name == "LinAlgError" and _VALUE_SHAPE.search(exc.message):
        return exc.line
    if exc.name == "AttributeError" and _ATTR_ON_VALUE.search(exc.message):
        return exc.line
    if exc.name == "AssertionError":
        for pattern in _ASSERT_TYPES:
            match = pattern.search(exc.message)
            if match and match.group("et").strip() != match.group("gt").strip():
                return (
                    f"the assertion expected a {match.group('et').strip()}, got a {match.group('gt').strip()}"
                )
    return None


# ----------------------------------------------------------------------------- the classifier
def classify(attempt: Attempt) -> str:
    """The attempt's class, one of `CLASSES` (precedence in the module docstring)."""
    return explain(attempt)[0]


def explain(attempt: Attempt) -> tuple[str, str]:
    """(class, one-line reason) for `attempt`; the rules are tried in the documented order."""
    # 1. OK
    if attempt.passed:
        return "OK", "the program passed its tests"

    # 2. WrongSyntax
    if attempt.status in ("syntax_error", "empty") or not attempt.code.strip():
        return (
            "WrongSyntax",
            f"sandbox status {attempt.status!r}" if attempt.code.strip() else "empty program",
        )
    try:
        tree = compile(attempt.code, "<attempt>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return "WrongSyntax", _clip(f"does not compile: {type(err).__name__}: {err.msg} (line {err.lineno})")
    except ValueError as err:
        return "WrongSyntax", _clip(f"does not compile: {err}")
    try:
        compile(
            tree, "<attempt>", "exec", dont_inherit=True
        )  # errors found after parsing (e.g. `return` at top level)
    except SyntaxError as err:
        return "WrongSyntax", _clip(f"does not compile: {type(err).__name__}: {err.msg} (line {err.lineno})")

    aliases = set(attempt.aliases) | {attempt.target}
    roots = {a.split(".")[0] for a in aliases}
    leaves = {a.rsplit(".", 1)[-1] for a in aliases}
    exc = parse_exception(attempt.stderr)
    static = _analyse(tree, attempt)
    called = bool(attempt.calls)

    # 3. WrongImport
    if exc is not None:
        if exc.name in ("ImportError", "ModuleNotFoundError"):
            return "WrongImport", exc.line
        missing = re.search(r"module '([\w.]+)' has no attribute", exc.message)
        if exc.name == "AttributeError" and missing and missing.group(1).split(".")[0] in roots:
            return "WrongImport", exc.line
        undefined = re.search(r"name '(\w+)' is not defined", exc.message)
        if exc.name == "NameError" and undefined and undefined.group(1) in leaves | roots:
            return "WrongImport", f"{exc.line} (the import is missing)"
    if not called and static.wrong_paths:
        return "WrongImport", _clip(
            f"imports {', '.join(static.wrong_paths)}, which is no path of {attempt.target} "
            f"(aliases: {', '.join(sorted(aliases))})"
        )

    # 4. WrongAPISelection
    if not called and not static.references_target:
        if static.library_calls:
            instead = f"called {', '.join(static.library_calls)} instead"
        elif static.defines_target_name:
            instead = f"reimplemented it as its own {attempt.target.rsplit('.', 1)[-1]}()"
        else:
            instead = f"no {'/'.join(sorted(roots))} API called (reimplemented)"
        return "WrongAPISelection", _clip(f"{attempt.target} never called; {instead}")

    # 5. WrongParam
    name = attempt.target.rsplit(".", 1)[-1]
    if exc is not None and _binding_error(exc, leaves, called or static.references_target):
        return "WrongParam", exc.line
    signature = parse_signature(attempt.signature)
    shapes = []
    for call in attempt.calls:
        try:
            shapes.append((call, call_shape(call, signature)))
        except TypeError as err:
            return "WrongParam", _clip(
                f"{_render_call(name, call)} does not bind to {name}{attempt.signature}: {err}"
            )
    reference = set()
    for call in attempt.reference_calls:
        try:
            reference.add(call_shape(call, signature))
        except TypeError:
            continue
    if reference:
        for call, shape in shapes:
            if shape not in reference:
                expected = " or ".join(sorted(_render_shape(s, signature) for s in reference))
                return "WrongParam", _clip(
                    f"{_render_call(name, call)} passes {_render_shape(shape, signature)}; "
                    f"the reference passes {expected}"
                )

    # 6. WrongShapeDtype
    if exc is not None:
        why = _shape_dtype(exc)
        if why:
            return "WrongShapeDtype", why

    # 7. WrongLogic
    if exc is not None:
        return "WrongLogic", exc.line
    if attempt.status in ("timeout", "memory", "killed", "output_limit", "error"):
        return "WrongLogic", f"sandbox status {attempt.status!r} in a program that calls {attempt.target}"
    return (
        "WrongLogic",
        f"{attempt.target} called acceptably but the program failed (status {attempt.status!r})",
    )
