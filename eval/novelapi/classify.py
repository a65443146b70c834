"""Deterministic failure classes of novel-API programs: NovelAPIBench's six (§3), plus OK.

The paper's classes mark six points along the API-invocation pipeline: WrongSyntax (invalid
Python), WrongAPISelection (the target never invoked: a sibling or a hallucinated symbol called
instead), WrongImport (the correct symbol, a wrong or missing import path), WrongParam (the right
call, a wrong argument), WrongShapeDtype (the right call, a contract violation inside the API's
body) and WrongLogic (the right call; the surrounding program is wrong). The paper decides the
cases its fast path leaves with a strong-LLM judge; this classifier decides every case from
evidence the sandbox records, so it needs no paid judge: the spy's calls of the target, the
traceback (its last exception and the file of its innermost frame), the library's files and
every name it defines (`eval/novelapi/library.py`), and the reference solution's calls.

An `Attempt` is one program a model completed, the target API it had to call (its qualified
name and every alias path of the same object), the target's signature text, the sandbox's
verdict and stderr, the spy record (one ``{"args": [repr, ...], "kwargs": {name: repr}}`` per
call of the target), the reference's calls, and the library's folders and names. Rules, in
precedence order — the first that applies wins:

1. **OK** — ``attempt.passed``.
2. **WrongSyntax** — ``compile(code)`` fails (SyntaxError, IndentationError, ValueError), the
   code is blank, or the sandbox status is ``syntax_error`` or ``empty``.
3. The target was never called and the run ended on a missing name: ``ImportError: cannot
   import name 'N'``, ``ModuleNotFoundError`` (the names the code imports from that module, or
   the names it reaches through it, ``M.N``), ``AttributeError: module 'M' has no attribute 'N'``
   with M in the library, or ``NameError`` of the target's or a library name. **WrongImport**
   only when N is the target's own symbol (`target_symbol`: its name, or for a method its class):
   the right symbol looked up at a wrong or missing path, from the library or any other module.
   **WrongAPISelection** otherwise: a sibling API (a name the library defines elsewhere, a method
   name used as a module function) or a symbol it has nowhere. Also **WrongImport** (static,
   with no call recorded): the code imports the target's symbol through a library path that is
   none of its aliases, even when a fallback hid the failure.
4. **WrongAPISelection** — no call of the target was recorded and the code never names it
   through any alias: another API of the library, or a reimplementation. (A program that names
   the target but never reached the call, because it crashed or timed out first, selected the
   right API and goes on to the next rules.)
5. **WrongParam** — the target was called with arguments its signature rejects: a binding
   ``TypeError`` naming the target (or naming none while the target was called), a recorded call
   that does not bind to ``attempt.signature``, or a call whose *argument shape* (the parameters
   passed explicitly, after binding) equals no reference call's.
6. **WrongShapeDtype** — the target was called and the last exception was raised inside the
   library (the innermost frame's file lies in its folders or in its package): a contract
   violation in the API's body.
7. **WrongParam** — a recorded call the API accepted passes other argument values (reprs after
   binding, defaults filled in) than every reference call: the right call, a wrong argument.
8. **WrongLogic** — everything else: the right call with the right arguments, and the program
   around it is wrong (a failed assertion, its own exception, a timeout).

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
    library_folders: tuple[str, ...] = ()  # where the library's files are (eval/novelapi/library.py)
    library_names: frozenset[str] = frozenset()  # every name the library defines anywhere
    library_modules: frozenset[str] = frozenset()  # its dotted module paths (tells module from symbol)


def target_symbol(path: str, modules: frozenset[str] | set[str] = frozenset()) -> tuple[str, ...]:
    """What of a qualified name is the symbol, what its module: the part after the longest prefix
    that is a module of the library (``novlib.text.Slugger.run`` -> ``("Slugger", "run")``). With
    no module known, PEP 8 decides: the leaf, with the capitalised (class) parts before it."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:i]) in modules:
            return tuple(parts[i:])
    i = len(parts) - 1
    while i > 1 and parts[i - 1][:1].isupper():
        i -= 1
    return tuple(parts[i:])


def _symbols(attempt: Attempt) -> set[tuple[str, ...]]:
    return {target_symbol(a, attempt.library_modules) for a in {*attempt.aliases, attempt.target}}


def _at_symbol(path: str, symbols: set[tuple[str, ...]]) -> bool:
    """Whether a resolved path ends with the target's symbol (at whatever module path)."""
    parts = tuple(path.split("."))
    return any(parts[-len(s) :] == s for s in symbols)


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


_FRAME = re.compile(r'^\s*File "(.+)", line \d+, in ')


def innermost_file(stderr: str) -> str | None:
    """The file of the innermost frame of the last traceback in `stderr` (where it was raised)."""
    lines = stderr.splitlines()
    header = max((i for i, line in enumerate(lines) if line.strip(" |+") in _HEADERS), default=None)
    if header is None:
        return None
    found = None
    for line in lines[header + 1 :]:
        match = _FRAME.match(line.lstrip(" |"))
        if match:
            found = match.group(1)
        elif line and not line[0].isspace() and not line.startswith("|"):
            break
    return found


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


def _bound_anywhere(tree: ast.AST) -> set[str]:
    """Every name the code binds somewhere (assigned, a parameter, defined, imported): a name
    outside this set that the code loads is free, i.e. never imported."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound


@dataclass(frozen=True)
class _Static:
    references_target: bool  # names the target through one of its aliases
    library_calls: tuple[str, ...]  # library APIs called, other than the target, in source order
    wrong_paths: tuple[str, ...]  # library paths to the target's symbol that are no alias
    defines_target_name: bool
    selects_target: bool  # names the target's symbol at any path, an alias, or never imported
    target_calls: tuple[ast.Call, ...]  # the call expressions of the target's symbol


def references_target(attempt: Attempt) -> bool:
    """Whether the attempt's code names the target through one of its paths (False if it does not parse)."""
    static = _static_of(attempt)
    return static is not None and static.references_target


def selects_target(attempt: Attempt) -> bool:
    """Whether the attempt's code selects the target API, decided statically (whether or not it
    ran): it names the target's symbol in a call or a use, through an alias, at any other module
    path, or as a name it never imported (`_Static.selects_target`); False if it does not parse."""
    static = _static_of(attempt)
    return static is not None and static.selects_target


def static_target_calls(attempt: Attempt) -> tuple[ast.Call, ...]:
    """The call expressions of the target's symbol in the attempt's code, reached or not (see
    `_calls_symbol`); empty if the code does not parse."""
    static = _static_of(attempt)
    return static.target_calls if static is not None else ()


def _static_of(attempt: Attempt) -> _Static | None:
    try:
        tree = ast.parse(attempt.code)
    except (SyntaxError, ValueError):
        return None
    return _analyse(tree, attempt)


def _analyse(tree: ast.AST, attempt: Attempt) -> _Static:
    aliases = set(attempt.aliases) | {attempt.target}
    roots = {a.split(".")[0] for a in aliases}
    symbols = _symbols(attempt)
    heads = {sym[0] for sym in symbols}
    names = _Names(tree, aliases)
    free = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in heads
    } - _bound_anywhere(tree)
    references = False
    calls: list[str] = []
    paths: list[str] = list(names.imported)
    used: list[str] = []  # every resolved use, Names included
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
            used.append(path)
            references = references or path in aliases
            if not isinstance(node, ast.Name):
                paths.append(path)

    def wrong(path: str) -> bool:
        head_only = {(sym[0],) for sym in symbols}
        return (
            path.split(".")[0] in roots
            and _at_symbol(path, symbols | head_only)
            and path not in aliases
            and not any(a.startswith(path + ".") for a in aliases)
        )

    wrong_paths = tuple(dict.fromkeys(p for p in paths if wrong(p)))
    defines = bool(names.defined & {sym[-1] for sym in symbols})
    owner_named = bool(free) or any(_at_symbol(p, {(sym[0],) for sym in symbols}) for p in used)
    target_calls = tuple(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _calls_symbol(node.func, names, symbols, aliases, free, owner_named)
    )
    selects = (
        references
        or bool(target_calls)
        or any(_at_symbol(p, symbols) for p in used)
        or bool(free & {sym[0] for sym in symbols if len(sym) == 1})
    )
    return _Static(references, tuple(calls), wrong_paths, defines, selects, target_calls)


def _calls_symbol(
    func: ast.AST,
    names: _Names,
    symbols: set[tuple[str, ...]],
    aliases: set[str],
    free: set[str],
    owner_named: bool,
) -> bool:
    """Whether a call's callee is the target: resolved to an alias or to the symbol at any path,
    a free name that is the target's (never imported), or, for a method, ``<expr>.method`` in
    code that names the method's class (an instance's type is not known statically)."""
    path = names.resolve(func)
    if path is not None:
        return path in aliases or _at_symbol(path, symbols)
    if isinstance(func, ast.Name):
        return func.id in free and (func.id,) in symbols
    return (
        isinstance(func, ast.Attribute)
        and owner_named
        and any(len(sym) > 1 and sym[-1] == func.attr for sym in symbols)
    )


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

    # 3. WrongImport / WrongAPISelection: the target was never reached because a name was missing
    if exc is not None and not called:
        verdict = _missing_symbol(exc, tree, attempt)
        if verdict is not None:
            return verdict
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

    # 5. WrongParam: arguments the signature rejects, or another set of parameters than the reference's
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

    # 6. WrongShapeDtype: the exception was raised inside the library, during a call of the target
    if exc is not None and called:
        where = innermost_file(attempt.stderr)
        if where is not None and _in_library(where, attempt.library_folders, roots):
            return "WrongShapeDtype", _clip(
                f"{exc.line} (raised inside the library, {where.rsplit('/', 1)[-1]})"
            )

    # 7. WrongParam: an accepted call with other argument values than every reference call
    wanted = [b for b in (bound_arguments(r, signature) for r in attempt.reference_calls) if b is not None]
    if wanted:
        for call in attempt.calls:
            values = bound_arguments(call, signature)
            if values is not None and not call.get("rejected") and values not in wanted:
                differs = sorted(k for k in values if all(w.get(k) != values[k] for w in wanted))
                shown = ", ".join(f"{k}={values[k]}" for k in differs) or _render_call(name, call)
                return "WrongParam", _clip(
                    f"{_render_call(name, call)}: {shown} differs from every reference call"
                )

    # 8. WrongLogic: the right call with the right arguments; the program around it is wrong
    if exc is not None:
        return "WrongLogic", exc.line
    if attempt.status in ("timeout", "memory", "killed", "output_limit", "error"):
        return "WrongLogic", f"sandbox status {attempt.status!r} in a program that calls {attempt.target}"
    return (
        "WrongLogic",
        f"{attempt.target} called acceptably but the program failed (status {attempt.status!r})",
    )


def _missing_symbol(exc: ExceptionInfo, tree: ast.AST, attempt: Attempt) -> tuple[str, str] | None:
    """Rule 3: (class, reason) when `exc` is a failed lookup of a name, else None. The right
    symbol (`target_symbol`'s head: the function, or a method's class) at a wrong or missing path
    is WrongImport; any other name is WrongAPISelection, a sibling or an invented symbol."""
    aliases = set(attempt.aliases) | {attempt.target}
    roots = {a.split(".")[0] for a in aliases}
    heads = {sym[0] for sym in _symbols(attempt)}
    missing = _missing_names(exc, tree, roots, _Names(tree, aliases))
    if missing is None:
        return None
    siblings = set(attempt.library_names) | roots
    if exc.name == "NameError" and not set(missing) & (heads | siblings):
        return None  # a variable of the program's own, not a symbol it looked for
    right = [n for n in missing if n in heads]
    if right and exc.name == "NameError":
        return "WrongImport", f"{exc.line} (the import is missing)"
    if right:
        return "WrongImport", _clip(f"{right[0]} is {attempt.target}'s symbol, at a wrong path: {exc.line}")
    if not missing:
        return "WrongAPISelection", _clip(f"the code reaches nothing of {attempt.target} there: {exc.line}")
    known = [n for n in missing if n in siblings]
    if known:
        return "WrongAPISelection", _clip(
            f"{', '.join(known)} is another name of the library, not {attempt.target}: {exc.line}"
        )
    return "WrongAPISelection", _clip(f"{', '.join(missing)} exists nowhere in the library: {exc.line}")


def _missing_names(exc: ExceptionInfo, tree: ast.AST, roots: set[str], names: _Names) -> list[str] | None:
    """The names an import-style failure could not find (None: `exc` is no such failure)."""
    if exc.name == "ImportError":
        found = re.search(r"cannot import name '(\w+)'", exc.message)
        return [found.group(1)] if found else None
    if exc.name == "ModuleNotFoundError":
        found = re.search(r"No module named '([\w.]+)'", exc.message)
        if not found:
            return None
        module = found.group(1)
        imported = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(module)
            for alias in node.names
            if alias.name != "*"
        ]
        return imported or _reached_through(module, tree, names)
    if exc.name == "AttributeError":
        found = re.search(r"module '([\w.]+)' has no attribute '(\w+)'", exc.message)
        return [found.group(2)] if found and found.group(1).split(".")[0] in roots else None
    if exc.name == "NameError":
        found = re.search(r"name '(\w+)' is not defined", exc.message)
        return [found.group(1)] if found else None
    return None


def _reached_through(module: str, tree: ast.AST, names: _Names) -> list[str]:
    """The names the code reaches as attributes of a module it imports whole (``import m as x``
    then ``x.name``): what it looked for in a module that does not exist."""
    reached: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            path = names.resolve(node)
            if path and path.startswith(module + ".") and "." not in path[len(module) + 1 :]:
                reached.append(path[len(module) + 1 :])
    return list(dict.fromkeys(reached))


def _in_library(path: str, folders: tuple[str, ...], roots: set[str]) -> bool:
    """Whether a frame's file lies in the library (its folders, or a path through its package)."""
    if any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders):
        return True
    return any(f"/{root}/" in path or path.endswith(f"/{root}.py") for root in roots)


def bound_arguments(call: dict, signature: inspect.Signature | None) -> dict[str, str] | None:
    """A recorded call's arguments by parameter (reprs, defaults filled in); None if it does not bind."""
    args, kwargs = list(call.get("args") or []), dict(call.get("kwargs") or {})
    if signature is None:
        return {**{f"#{i}": a for i, a in enumerate(args)}, **kwargs}
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return {k: repr(v) if not isinstance(v, str) else v for k, v in bound.arguments.items()}
