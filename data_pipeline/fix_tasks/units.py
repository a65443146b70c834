"""What a code tree offers the fix-task builder: modules that stand alone, their units, and the tests
that can run against one module by itself.

A *subject* is one module with its tests. The module must stand alone (it imports no other module
of its tree: the sandbox runs one file), and its tests come from two places:

- the tree's pytest files (``test_*.py``, ``*_test.py``, anything under ``tests/``) that import the
  module: each test function (and each ``test_*`` method of a ``Test*`` class) that takes no fixture
  becomes a case (and each ``test*`` method of a ``unittest.TestCase``, whatever its class's name,
  as unittest runs it), ``@pytest.mark.parametrize`` cases are called once per parameter set; the file's
  imports of the module are dropped (``import pkg.mod as m`` makes ``m.f`` plain ``f``), its other
  imports and helpers are kept; a file that imports another module of the tree is not used for it;
- the doctests in the module's own docstrings: ``>>> expr`` with an expected value becomes
  ``assert (expr) == value`` when the value is a literal, else ``assert repr(expr) == 'value'``; a
  statement runs as it is (examples marked ``+SKIP`` or matched loosely, that expect an exception,
  print, or import are left out).

A *unit* is a function, or a method of a top-level class. Its tests are the cases that name it (a
method: its name and its class's) and its own doctests; the builder measures, in the sandbox,
which of its lines they execute. Every module and unit not used is counted under a reason.
"""

from __future__ import annotations

import ast
import copy
import doctest
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from data_pipeline.novel_api.mining import is_test_file

SKIP_DIRS = frozenset(
    {".git", ".hg", ".tox", ".nox", ".venv", "venv", "build", "dist", "__pycache__", "docs"}
)
SKIP_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py", "__main__.py"})
PARAMETRIZE = "parametrize"
LAYOUT_DIRS = frozenset({"src", "lib"})  # folders a layout puts packages under, never imported by name


@dataclass(frozen=True)
class Case:
    """One test, as code the tests script defines (`setup`) and one line that runs it (`call`)."""

    setup: str  # a def or class, shared by the cases of one class (emitted once)
    call: str
    names: frozenset[str]  # the names and attributes it uses
    header: str = ""  # its file's imports and helpers


@dataclass(frozen=True)
class Unit:
    name: str  # "f" or "Class.method"
    first: int  # the def's first line (decorators included), 1-based
    last: int
    body_first: int  # first line of the body after the docstring
    cases: tuple[Case, ...]

    @property
    def tests(self) -> str:
        """The unit's tests as one script: its files' headers, its cases' code, then the calls."""
        return tests_script(self.cases)


@dataclass(frozen=True)
class Subject:
    id: str  # "<tree>:<module path>"
    path: str
    source: str
    units: tuple[Unit, ...]


@dataclass
class Discovery:
    subjects: list[Subject] = field(default_factory=list)
    modules: Counter[str] = field(default_factory=Counter)  # "found", "used" and each skip reason
    units: Counter[str] = field(default_factory=Counter)  # "found" and each skip reason before running


def tests_script(cases: tuple[Case, ...] | list[Case]) -> str:
    parts: list[str] = []
    for block in [c.header for c in cases] + [c.setup for c in cases]:
        if block and block not in parts:
            parts.append(block)
    calls = "\n".join(c.call for c in cases)
    return "\n\n".join([*parts, calls]) + "\n"


def python_files(root: Path) -> list[Path]:
    """The tree's .py files in a fixed order: a git clone's tracked files (not a virtualenv or build
    output inside it), else every file outside the usual build and environment folders."""
    tracked = _tracked(root)
    found = []
    for path in sorted(root.rglob("*.py")) if tracked is None else tracked:
        parts = path.relative_to(root).parts
        if any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]):
            continue
        found.append(path)
    return found


def _tracked(root: Path) -> list[Path] | None:
    """The .py files git tracks at `root` (a clone's top folder), or None when it is no clone."""
    if not (root / ".git").exists():
        return None
    proc = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--", "*.py"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        return None
    return sorted(root / name for name in proc.stdout.split("\0") if name and (root / name).is_file())


def dotted(rel: Path) -> list[str]:
    """Every name the module may be imported by: `src/pkg/mod.py` -> mod, pkg.mod, src.pkg.mod."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return [".".join(parts[i:]) for i in range(len(parts) - 1, -1, -1)] if parts else []


def top_name(rel: Path) -> str:
    """The name the tree's code imports a file's top package by (`src/pkg/mod.py` -> pkg)."""
    parts = list(rel.with_suffix("").parts)
    while len(parts) > 1 and parts[0] in LAYOUT_DIRS:
        parts = parts[1:]
    return parts[0]


def discover(root: Path, label: str, max_lines: int) -> Discovery:
    """The subjects of the tree at `root` (see the module docstring)."""
    found = Discovery()
    files = python_files(root)
    tests, modules = [], []
    for path in files:
        rel = path.relative_to(root)
        if rel.name in SKIP_FILES:  # packaging and task-runner scripts, pytest's conftest
            continue
        (tests if is_test_file(rel.as_posix()) else modules).append(rel)  # as the novel-API miner reads them
    own_names = {top_name(rel) for rel in modules + tests}
    parsed_tests = {}
    for rel in tests:
        tree = _parse(root / rel)
        if tree is not None:
            parsed_tests[rel] = tree
    for rel in modules:
        found.modules["found"] += 1
        source = _read(root / rel)
        tree = _parse(root / rel) if source is not None else None
        if tree is None or source is None:
            found.modules["unreadable"] += 1
            continue
        if len(source.splitlines()) > max_lines:
            found.modules["too_long"] += 1
            continue
        if _imports_own(tree, own_names, set(dotted(rel))):
            found.modules["imports_its_tree"] += 1
            continue
        cases = []
        for test_tree in parsed_tests.values():
            cases += module_cases(test_tree, set(dotted(rel)), own_names)
        units = _units(tree, cases, found.units)
        if not units:
            found.modules["no_tested_unit"] += 1
            continue
        found.modules["used"] += 1
        found.subjects.append(Subject(f"{label}:{rel.as_posix()}", rel.as_posix(), source, tuple(units)))
    return found


def single_program(ident: str, source: str, tests: str) -> Discovery:
    """One program with its own tests (a benchmark problem's `after` and `tests`): each of its
    functions is a unit whose tests are the whole script."""
    found = Discovery()
    found.modules["found"] += 1
    try:
        tree = ast.parse(source)
        ast.parse(tests)
    except SyntaxError:
        found.modules["unreadable"] += 1
        return found
    names = frozenset(_names(ast.parse(tests)))
    case = Case(setup="", call=tests.rstrip("\n"), names=names)
    units = _units(tree, [case], found.units)
    if units:
        found.modules["used"] += 1
        found.subjects.append(Subject(ident, ident, source, tuple(units)))
    else:
        found.modules["no_tested_unit"] += 1
    return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _parse(path: Path) -> ast.Module | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _imports_own(tree: ast.Module, own: set[str], itself: set[str]) -> bool:
    """Whether the module imports another module of its tree (relatively, or by its tree's names)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                return True
            if node.module and node.module.split(".")[0] in own and node.module not in itself:
                return True
        elif isinstance(node, ast.Import) and any(
            a.name.split(".")[0] in own and a.name not in itself for a in node.names
        ):
            return True
    return False


def _names(node: ast.AST) -> set[str]:
    used = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            used.add(n.id)
        elif isinstance(n, ast.Attribute):
            used.add(n.attr)
    return used


class _Unqualify(ast.NodeTransformer):
    """`m.f` -> `f` for the aliases `m` of the module under test (`import pkg.mod as m`)."""

    def __init__(self, aliases: set[str], chains: set[str]) -> None:
        self.aliases, self.chains = aliases, chains

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        base = node.value
        if (isinstance(base, ast.Name) and base.id in self.aliases) or (
            isinstance(base, ast.Attribute | ast.Name) and ast.unparse(base) in self.chains
        ):
            return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        return self.generic_visit(node)


def module_cases(tree: ast.Module, names: set[str], own: set[str]) -> list[Case]:
    """The cases of a test file that can run against the module imported as any of `names`; none
    when the file does not import it or imports another module of the tree."""
    aliases: set[str] = set()
    chains: set[str] = set()
    renames: list[str] = []
    header: list[ast.stmt] = []
    uses_module = False
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level:
                return []
            module = stmt.module or ""
            if module in names:
                uses_module = True
                renames += [f"{a.asname} = {a.name}" for a in stmt.names if a.asname and a.name != "*"]
                continue
            whole = [a for a in stmt.names if f"{module}.{a.name}" in names]
            if whole:
                uses_module = True
                aliases |= {a.asname or a.name for a in whole}
                if len(whole) == len(stmt.names):
                    continue
                return []
            if module.split(".")[0] in own:
                return []
            header.append(stmt)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name in names:
                    uses_module = True
                    if alias.asname:
                        aliases.add(alias.asname)
                    else:
                        chains.add(alias.name)
                elif alias.name.split(".")[0] in own:
                    return []
            rest = [a for a in stmt.names if a.name not in names]
            if rest:
                header.append(ast.Import(rest))
        elif isinstance(stmt, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef | ast.If):
            continue
        else:  # a try that imports (`try: import ujson as json`): not the tree's own modules
            tops = own | {name.split(".")[0] for name in names}
            nested = [n for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)]
            if any(_own_import(n, tops) for n in nested):
                return []
            header.append(stmt)
    if not uses_module:
        return []
    tree = _Unqualify(aliases, chains).visit(copy.deepcopy(tree))  # the parsed file serves every module
    helpers = [
        s
        for s in tree.body
        if isinstance(s, ast.FunctionDef | ast.ClassDef)
        and not s.name.startswith(("test", "Test"))
        and not _is_fixture(s)
    ]
    head = "\n".join([ast.unparse(s) for s in header] + renames + [ast.unparse(s) for s in helpers])
    cases = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("test"):
            call = _call(stmt, stmt.name)
            if call is not None:
                cases.append(Case(ast.unparse(stmt), call, frozenset(_names(stmt)), head))
        elif isinstance(stmt, ast.ClassDef):
            style = _class_style(stmt)
            if style is None:
                continue
            setup = ast.unparse(stmt)
            for method in stmt.body:
                if isinstance(method, ast.FunctionDef) and method.name.startswith("test"):
                    if style == "unittest":  # as unittest runs one: an instance, setUp, the test, tearDown
                        call = _call(method, f"_case.{method.name}", method_of=stmt)
                        if call is not None:
                            call = f"_case = {stmt.name}({method.name!r})\n_case.setUp()\n{call}\n_case.tearDown()"
                    else:
                        call = _call(method, f"{stmt.name}().{method.name}", method_of=stmt)
                    if call is not None:
                        cases.append(Case(setup, call, frozenset(_names(method)), head))
    return cases


def _own_import(node: ast.Import | ast.ImportFrom, own: set[str]) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] in own
    return any(alias.name.split(".")[0] in own for alias in node.names)


def _is_fixture(node: ast.AST) -> bool:
    return any("fixture" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def _class_style(cls: ast.ClassDef) -> str | None:
    """How a test class runs: "plain" (a pytest class built without arguments, with no hooks or
    fixtures), "unittest" (a `unittest.TestCase` without class-level setup), or None (not run)."""
    names = {s.name for s in cls.body if isinstance(s, ast.FunctionDef)}
    if any(_is_fixture(s) for s in cls.body):
        return None
    bases = [ast.unparse(b) for b in cls.bases]
    if bases in (["unittest.TestCase"], ["TestCase"]):  # collected whatever its name, as unittest does
        return None if names & {"setUpClass", "tearDownClass", "__init__"} else "unittest"
    if not cls.name.startswith("Test") or bases:  # pytest collects plain classes named Test*
        return None
    if names & {"setup_method", "setup_class", "setUp", "__init__", "teardown_method"}:
        return None
    return "plain"


def _call(func: ast.FunctionDef, target: str, method_of: ast.ClassDef | None = None) -> str | None:
    """The line that runs a test function, or None when it needs what pytest would give it (a
    fixture, a mark we do not run)."""
    params = [a.arg for a in func.args.args]
    if method_of is not None:
        params = params[1:]
    marks = [d for d in func.decorator_list if PARAMETRIZE in ast.unparse(d)]
    others = [d for d in func.decorator_list if d not in marks]
    if others or len(marks) > 1 or func.args.vararg or func.args.kwonlyargs:
        return None
    if not marks:
        return None if params else f"{target}()"
    mark = marks[0]
    if not isinstance(mark, ast.Call) or len(mark.args) != 2 or mark.keywords:
        return None
    argnames, values = mark.args
    if not isinstance(argnames, ast.Constant) or not isinstance(argnames.value, str):
        return None
    names = [n.strip() for n in argnames.value.split(",") if n.strip()]
    if names != params:
        return None
    values_text = ast.unparse(values)
    if len(names) == 1:
        return f"for _case in {values_text}:\n    {target}(_case)"
    return f"for _case in {values_text}:\n    {target}(*_case)"


UNMATCHED = doctest.SKIP | doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE  # doctest's looser matching


def _doctest_case(doc: str | None, unit: str) -> Case | None:
    """The unit's doctest examples as asserts (see the module docstring); None when it has none.
    Left out: examples marked `+SKIP`, or matched loosely (`+ELLIPSIS`, `+NORMALIZE_WHITESPACE`),
    that expect an exception, print, or import a module (the module's names are the program's)."""
    if not doc:
        return None
    try:
        examples = doctest.DocTestParser().get_examples(doc)
    except ValueError:
        return None
    lines = []
    for example in examples:
        loose = any(flag & UNMATCHED for flag, on in example.options.items() if on)
        if example.exc_msg is not None or loose or "..." in example.want:
            continue
        source = example.source.rstrip("\n")
        want = example.want.rstrip("\n")
        try:
            statements = ast.parse(source).body
        except SyntaxError:
            continue
        if any(isinstance(node, ast.Import | ast.ImportFrom) for node in statements):
            continue
        if not want:
            lines.append(source)
            continue
        if (
            len(statements) != 1
            or not isinstance(statements[0], ast.Expr)
            or "print" in _names(statements[0])
        ):
            continue
        shown = ast.unparse(statements[0].value)  # the example's comments dropped
        if _is_literal(want):  # compared as values: quotes and line breaks of the printout do not matter
            lines.append(f"assert ({shown}) == {' '.join(want.split())}, {shown!r}")
        else:
            lines.append(f"assert repr({shown}) == {want!r}, {shown!r}")
    if not any(line.startswith("assert") for line in lines):
        return None
    body = "\n".join(lines)
    try:
        names = _names(ast.parse(body))
    except SyntaxError:  # an example that only parses inside doctest's own runner
        return None
    return Case("", body, frozenset(names) | {unit})


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(" ".join(text.split()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _units(tree: ast.Module, cases: list[Case], counts: Counter[str]) -> list[Unit]:
    """The module's functions and methods that some case names (see the module docstring)."""
    found = []
    defs: list[tuple[str, ast.FunctionDef, set[str]]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            defs.append((stmt.name, stmt, {stmt.name}))
        elif isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                if isinstance(member, ast.FunctionDef):
                    needed = {stmt.name} if member.name.startswith("__") else {stmt.name, member.name}
                    defs.append((f"{stmt.name}.{member.name}", member, needed))
    for name, node, needed in defs:
        counts["found"] += 1
        body = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
        if not body or all(isinstance(s, ast.Pass) for s in body):
            counts["empty"] += 1
            continue
        chosen = [c for c in cases if needed <= c.names]
        doc = _doctest_case(ast.get_docstring(node, clean=False), name.split(".")[-1])
        if doc is not None:
            chosen.append(doc)
        if not chosen:
            counts["untested"] += 1
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        found.append(Unit(name, first, node.end_lineno or node.lineno, body[0].lineno, tuple(chosen)))
    return found
