"""Examples from where they live: the library's own tests and documentation, in its source distribution.

Docstrings with doctests are rare outside a few libraries; tests call nearly every API, the way
its authors meant it to be called, and the docs show the rest. From the new version's sdist (found
through the index's JSON simple API, downloaded once into the build folder):

- **tests** (`test_*.py`, `*_test.py`, files under a `tests`/`test` folder): each test function
  whose body uses the API becomes a standalone program, its parameters bound: those
  `pytest.mark.parametrize` gives to the first case, the others to fixtures of the file or of the
  conftest.py files above it (each inlined as a function and called, a yield fixture up to its
  yield, one with `params=` once per param, each variant a program; pytest's own, such as
  `tmp_path`, drop the test); a `Test*` method's `self` unused. The program: the imports it
  reads (not pytest's), the module-level helpers and constants it uses, the fixtures, then the
  body itself at top level, a `pytest.raises` block turned into try/except;
- **examples** (`.py` scripts under `examples/`, `example/`, `docs_src/`): the whole script, an
  application as its authors run it;
- **docs** (`.rst`, `.md`, `.txt` under `doc`/`docs` and the README): each Python code block and each
  run of `>>>` lines that calls the API, as a session: with the page's earlier blocks it builds on
  (they bind a name it reads) in front, so a mapped class declared three blocks up comes with it.

`examples=PATH` adds the library's repository at the new version's tag (a folder, a git clone, or a
git URL cloned at the tag) when the sdist lacks its tests or docs (`read_repository`).

Each example keeps its origin (`path:line`); bundles run it against the new version and keep it
only if it runs (`bundles.py`). The project's `conftest.py` files also say which names its doctests
take for granted (`doctest_namespace["pd"] = pd`); bundles import those for an example that uses
them. Pure functions of text: `mine` never executes anything.
"""

from __future__ import annotations

import ast
import copy
import doctest
import io
import logging
import os
import re
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from functools import partial
from itertools import islice, product
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from core.errors import UserError
from data_pipeline.novel_api.docsnippets import bound_names, code_blocks, defined_names, free_names
from data_pipeline.novel_api.envs import file_version, index_files, same_version

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 400_000  # a generated or vendored file this large is not documentation
PER_API = 3  # examples kept per API and source: the shortest that run
TRIED_PER_API = 2 * PER_API  # examples run per API and source, so one that fails leaves no slot empty
MAX_PARAMS = 4  # variants of one test from `params=` fixtures: the first four combinations
SKIPPED_IMPORTS = {"pytest", "unittest", "hypothesis", "conftest", "mock", "doctest"}
DOC_SUFFIXES = (".rst", ".md", ".txt")
EXAMPLE_DIRS = {"examples", "example", "docs_src"}
ASYNC_MARKS = {"pytest.mark.asyncio", "pytest.mark.anyio", "pytest.mark.trio"}
_DOCTEST_OPTION = re.compile(r"#\s*doctest:[^\n]*")


@dataclass(frozen=True)
class Mined:
    code: str
    source: str  # tests | docs | examples
    origin: str  # path inside the sdist, with the line: "tests/test_iterutils.py:42"
    # the example's own lines (a test's body, without the fixtures and helpers written in front)
    body: str = field(default="", compare=False)


class TestProgram(NamedTuple):
    line: int
    code: str  # the standalone program
    body: str  # the test's own statements, as they end the program


@dataclass
class SdistFindings:
    """What an sdist gives the bundles: `examples` (qualname -> mined examples) and `namespace`
    (name -> the import binding it) that the project's doctests assume (`doctest_namespace`)."""

    examples: dict[str, list[Mined]]
    namespace: dict[str, str]


# ---------------------------------------------------------------------------------------- fetching
def fetch_sdist(library: str, version: str, folder: Path, index: str | None = None) -> Path | None:
    """The version's source distribution, downloaded into `folder` (kept for a rerun); None when the
    index has none or cannot be read."""
    page = index_files(library, index)
    if page is None:
        return None
    url, files = page
    for f in files:
        name = str(f.get("filename", ""))
        if name.endswith((".tar.gz", ".zip")) and same_version(file_version(name) or "", version):
            target = Path(folder) / name
            if target.is_file():
                return target
            try:
                with urllib.request.urlopen(urllib.parse.urljoin(url, f["url"]), timeout=120) as r:
                    data = r.read()
            except (urllib.error.URLError, OSError, KeyError):
                return None
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(name + ".partial")
            partial.write_bytes(data)
            partial.replace(target)
            return target
    return None


def read_sdist(path: Path) -> dict[str, str]:
    """Path (without the top folder) -> text of the sdist's Python and documentation files."""
    if path.name.endswith(".zip"):
        texts: dict[str, str] = {}
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if (inner := _kept_name(info.filename, info.file_size)) is not None:
                    texts[inner] = archive.read(info).decode("utf-8", "replace")
        return texts
    with tarfile.open(path) as archive:
        return _tar_texts(archive)


def _kept_name(name: str, size: int) -> str | None:
    """The path inside the archive's top folder, for a Python or documentation file of a sane size."""
    parts = PurePosixPath(name).parts
    inner = "/".join(parts[1:]) if len(parts) > 1 else name
    return inner if inner.endswith((".py", *DOC_SUFFIXES)) and size <= MAX_FILE_BYTES else None


def _tar_texts(archive: tarfile.TarFile) -> dict[str, str]:
    texts: dict[str, str] = {}
    for member in archive:
        if member.isfile() and (inner := _kept_name(member.name, member.size)) is not None:
            handle = archive.extractfile(member)
            if handle is not None:
                texts[inner] = handle.read().decode("utf-8", "replace")
    return texts


def read_repository(source: str, version: str, folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The files of the library's repository at the new version's tag (`v1.2` or `1.2`), and where
    they came from ({examples, tag, commit}). `source`: a folder (a git clone: the tag's tree is
    read, whatever is checked out; a plain folder as it is) or a git URL, cloned into `folder` at
    the tag (only the tag's commit is fetched)."""
    tags = (f"v{version}", version)
    if "://" in source or source.startswith("git@"):
        root = folder / "repository"
        if not (root / ".git").is_dir():
            errors = []
            for tag in tags:
                shutil.rmtree(root, ignore_errors=True)
                proc = _git("clone", "--quiet", "--depth", "1", "--branch", tag, source, str(root))
                if proc.returncode == 0:
                    break
                errors.append(_last_line(proc.stderr))
            else:
                raise UserError(
                    f"examples={source}: no tag {' or '.join(tags)} could be cloned ({errors[-1]})"
                )
    else:
        root = Path(source)
    if not (root / ".git").exists():
        texts = {
            str(p.relative_to(root).as_posix()): p.read_text("utf-8", "replace")
            for p in sorted(root.rglob("*"))
            if p.is_file()
            and ".git" not in p.parts
            and _kept_name("top/" + p.relative_to(root).as_posix(), p.stat().st_size)
        }
        return texts, {"examples": source, "tag": None, "commit": None}
    tag = next(
        (
            t
            for t in tags
            if _git("-C", str(root), "rev-parse", "--verify", "--quiet", f"refs/tags/{t}").returncode == 0
        ),
        None,
    )
    ref = f"refs/tags/{tag}" if tag else "HEAD"
    if tag is None:
        log.warning("examples=%s: no tag %s: reading what is checked out", source, " or ".join(tags))
    commit = _git("-C", str(root), "rev-parse", f"{ref}^{{commit}}").stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", "--prefix=top/", commit], capture_output=True
    )
    if archive.returncode != 0:
        raise UserError(f"examples={source}: git archive failed ({_last_line(archive.stderr.decode())})")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        return _tar_texts(tar), {"examples": source, "tag": tag, "commit": commit}


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


# ------------------------------------------------------------------------------------------ mining
def is_test_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    return name.endswith(".py") and (
        name.startswith("test_")
        or name.endswith("_test.py")
        or any(p in ("tests", "test") for p in parts[:-1])
    )


def is_example_file(path: str) -> bool:
    """A script of the project's examples folder (`examples/`, `example/`, FastAPI's `docs_src/`)."""
    parts = PurePosixPath(path).parts
    return path.endswith(".py") and any(p in EXAMPLE_DIRS for p in parts[:-1])


def is_doc_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return path.endswith(DOC_SUFFIXES) and (
        parts[-1].upper().startswith("README") or any(p in ("doc", "docs") for p in parts[:-1])
    )


def call_pattern(qualname: str, kind: str) -> re.Pattern[str]:
    """What a use of the API looks like in text (outside the imports): a call `name(` (`.name(`
    for a method); a class by its name anywhere (an annotation, `TypeAdapter(Cls)`) as well."""
    short = qualname.rsplit(".", 1)[-1]
    if kind == "method":
        return re.compile(rf"\.{re.escape(short)}\s*\(")
    if kind == "class":
        return re.compile(rf"\b{re.escape(short)}\b")
    return re.compile(rf"\b{re.escape(short)}\s*\(")


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _test_bodies(
    tree: ast.Module,
) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.stmt], list[str]]]:
    """Test functions: top-level `test_*` and `Test*` methods (with an unused `self`), with their
    parametrized arguments bound to the first case, and the names of the fixtures they ask for."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            bound = _bound_body(node, 0)
            if bound is not None:
                found.append((node, *bound))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                    bound = _bound_body(item, 1)
                    if bound is not None and "self" not in _names(ast.Module(body=bound[0], type_ignores=[])):
                        found.append((item, *bound))
    return found


def _bound_body(
    func: ast.FunctionDef | ast.AsyncFunctionDef, skip: int
) -> tuple[list[ast.stmt], list[str]] | None:
    """The function's body after assignments of its parametrized arguments' first case, and its
    other parameters (fixtures); None when it needs anything else (another decorator, *args). An
    `async def` test's body keeps its `await`s: the program awaits at top level (examples run under
    an event loop), and its asyncio/anyio mark is what made pytest run it so."""
    a = func.args
    if a.posonlyargs or a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
        return None
    params = [arg.arg for arg in a.args[skip:]]
    given: dict[str, ast.expr] = {}
    for decorator in func.decorator_list:
        if isinstance(func, ast.AsyncFunctionDef) and ast.unparse(decorator) in ASYNC_MARKS:
            continue
        case = _first_case(decorator)
        if case is None:
            return None
        given.update(case)
    if not set(given) <= set(params):
        return None
    assigns = [
        ast.Assign(targets=[ast.Name(name, ast.Store())], value=given[name], lineno=0)
        for name in params
        if name in given
    ]
    return [*assigns, *func.body], [name for name in params if name not in given]


def _first_case(decorator: ast.expr) -> dict[str, ast.expr] | None:
    """`@pytest.mark.parametrize("a, b", [(1, 2), ...])` -> {"a": 1, "b": 2}; None for any other decorator."""
    if not (
        isinstance(decorator, ast.Call)
        and ast.unparse(decorator.func) == "pytest.mark.parametrize"
        and len(decorator.args) >= 2
        and isinstance(decorator.args[1], (ast.List, ast.Tuple))
        and decorator.args[1].elts
    ):
        return None
    first_arg = decorator.args[0]
    if isinstance(first_arg, ast.Constant) and isinstance(first_arg.value, str):
        names = [n.strip() for n in first_arg.value.split(",") if n.strip()]
    elif isinstance(first_arg, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in first_arg.elts
    ):
        names = [e.value for e in first_arg.elts]
    else:
        return None
    case = decorator.args[1].elts[0]
    if isinstance(case, ast.Call) and ast.unparse(case.func) == "pytest.param":  # pytest.param(1, 2, id=...)
        values = list(case.args)
    elif len(names) == 1:
        values = [case]
    elif isinstance(case, (ast.Tuple, ast.List)):
        values = list(case.elts)
    else:
        return None
    return dict(zip(names, values, strict=True)) if len(values) == len(names) else None


class _RaisesToTry(ast.NodeTransformer):
    """`with pytest.raises(E): body` -> `try: body / except E: pass / else: raise AssertionError`,
    so a test that checks an error needs no pytest. `with pytest.raises(E) as info:` binds `info`
    to a namespace with pytest's `value` and `type` (falcon reads `info.value.args[0]`); then
    `uses_types` says the program needs `import types as _types` (a name of its own: a test may
    import sqlalchemy's `types`)."""

    def __init__(self) -> None:
        self.uses_types = False

    def visit_With(self, node: ast.With) -> ast.AST:
        self.generic_visit(node)
        item = node.items[0] if len(node.items) == 1 else None
        call = item.context_expr if item else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "raises"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "pytest"
            and call.args
            and (item.optional_vars is None or isinstance(item.optional_vars, ast.Name))
        ):
            return node
        failed = ast.Raise(
            exc=ast.Call(ast.Name("AssertionError", ast.Load()), [ast.Constant("did not raise")], [])
        )
        caught: list[ast.stmt] = [ast.Pass()]
        if item.optional_vars is not None:
            self.uses_types = True
            caught = [
                ast.parse(
                    f"{item.optional_vars.id} = _types.SimpleNamespace(value=_raised, type=type(_raised))"
                ).body[0]
            ]
        handler = ast.ExceptHandler(
            type=call.args[0], name="_raised" if item.optional_vars is not None else None, body=caught
        )
        return ast.copy_location(
            ast.Try(body=node.body, handlers=[handler], orelse=[failed], finalbody=[]), node
        )


@dataclass
class _TestFile:
    """What a test file or conftest.py offers a program: its imports (pytest's aside), module-level
    helpers and constants, and fixtures: each a list of variants (one per param of a `params=`
    fixture), None for one that cannot be inlined."""

    imports: list[ast.stmt]
    helpers: list[ast.stmt]
    fixtures: dict[str, list[ast.FunctionDef] | None]


def _test_file(tree: ast.Module) -> _TestFile:
    imports = [
        s
        for s in tree.body
        if isinstance(s, (ast.Import, ast.ImportFrom))
        and not (isinstance(s, ast.ImportFrom) and s.level)
        and not any(
            (a.name if isinstance(s, ast.Import) else s.module or "").split(".")[0] in SKIPPED_IMPORTS
            for a in s.names
        )
    ]
    fixtures: dict[str, list[ast.FunctionDef] | None] = {}
    helpers = []
    for s in tree.body:
        kind = _fixture_kind(s)
        if kind is not None:
            fixtures[_fixture_name(s)] = [s] if kind == "plain" else _param_variants(s)
        elif (
            defined_names(s)
            and not _main_guard(s)
            and not (
                isinstance(s, (ast.FunctionDef, ast.ClassDef))
                and s.name.lower().startswith(("test", "pytest_"))
            )
        ):
            helpers.append(s)
    return _TestFile(imports, helpers, fixtures)


def _main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (a test file that runs pytest on itself): no helper."""
    return isinstance(node, ast.If) and ast.unparse(node.test).replace('"', "'") in (
        "__name__ == '__main__'",
        "'__main__' == __name__",
    )


def _fixture_kind(node: ast.stmt) -> str | None:
    """ "plain" for a `@pytest.fixture` function, "params" for one with `params=`, else None."""
    if not isinstance(node, ast.FunctionDef):
        return None
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in ("pytest.fixture", "fixture"):
            keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
            return "params" if any(k.arg == "params" for k in keywords) else "plain"
    return None


def _param_variants(fixture: ast.FunctionDef) -> list[ast.FunctionDef] | None:
    """A `params=` fixture as plain ones, one per param (at most `MAX_PARAMS`), `request.param`
    replaced by it: falcon's `asgi` fixture (`params=[True, False]`) gives an ASGI and a WSGI app,
    and the bundles keep the first program that runs. None when the fixture reads `request` for more
    than `request.param` or its params are no literal list."""
    params = next(
        (
            k.value
            for d in fixture.decorator_list
            if isinstance(d, ast.Call)
            for k in d.keywords
            if k.arg == "params"
        ),
        None,
    )
    if not isinstance(params, (ast.List, ast.Tuple)) or not params.elts:
        return None
    variants = []
    for value in params.elts[:MAX_PARAMS]:
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "pytest.param":
            if not value.args:
                return None
            value = value.args[0]
        if isinstance(value, ast.Starred):  # `params=[*CASES]`: no literal case to write in
            return None
        try:
            plain = _ReplaceParam(value).visit(copy.deepcopy(fixture))
        except RecursionError:  # a fixture nested too deep to copy: left out, like any other
            return None
        if "request" in _names(ast.Module(body=plain.body, type_ignores=[])):
            return None
        plain.args.args = [a for a in plain.args.args if a.arg != "request"]
        variants.append(plain)
    return variants


class _ReplaceParam(ast.NodeTransformer):
    def __init__(self, value: ast.expr) -> None:
        self.value = value

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "request" and node.attr == "param":
            return copy.deepcopy(self.value)
        return self.generic_visit(node)


def _fixture_name(node: ast.FunctionDef) -> str:
    for decorator in node.decorator_list:
        for k in decorator.keywords if isinstance(decorator, ast.Call) else []:
            if k.arg == "name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                return k.value.value
    return node.name


def _fixture_setup(
    wanted: list[str], files: list[_TestFile]
) -> list[tuple[list[ast.FunctionDef], str]] | None:
    """The fixtures `wanted` needs, dependencies first: (its variants, name), looked up in the test
    file, then the conftest.py files from the nearest up; None when one is missing (pytest's own,
    `tmp_path`, `request`) or cannot be inlined."""
    order: list[tuple[list[ast.FunctionDef], str]] = []
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> bool:
        if name in done:
            return True
        where = next((f for f in files if name in f.fixtures), None)
        variants = where.fixtures[name] if where else None
        if variants is None or name in path or len(path) > 5:
            return False
        args = variants[0].args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            return False
        if not all(visit(a.arg, (*path, name)) for a in args.args):
            return False
        order.append((variants, name))
        done.add(name)
        return True

    return order if all(visit(name, ()) for name in wanted) else None


def _fixture_statements(fixture: ast.FunctionDef, name: str) -> list[ast.stmt]:
    """`def _fixture_app(): <its body>` then `app = _fixture_app()` (`next(...)` for a yield
    fixture: the code after its yield, the teardown, does not run)."""
    function = copy.deepcopy(fixture)
    function.name, function.decorator_list = f"_fixture_{name}", []
    call = f"_fixture_{name}({', '.join(a.arg for a in fixture.args.args)})"
    generator = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for s in fixture.body for n in ast.walk(s))
    value = ast.parse(f"next({call})" if generator else call, mode="eval").body
    return [function, ast.Assign(targets=[ast.Name(name, ast.Store())], value=value, lineno=0)]


def test_programs(path: str, text: str, conftests: list[str] = ()) -> list[TestProgram]:
    """(line, standalone program, its body) of each test function in a test file whose fixtures can be
    inlined: from the file itself or `conftests` (conftest.py texts, the nearest first), with no
    parameters of pytest's own."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    files = [_test_file(tree)]
    for conftest in conftests:
        try:
            files.append(_test_file(ast.parse(conftest)))
        except (SyntaxError, ValueError):
            continue
    programs = []
    for func, body, wanted in _test_bodies(tree):
        setup = _fixture_setup(wanted, files)
        if setup is None:
            continue
        raises = _RaisesToTry()
        body = [raises.visit(statement) for statement in body]
        for chosen in _combinations([len(variants) for variants, _ in setup]):
            fixtures = [
                s
                for index, (variants, name) in zip(chosen, setup, strict=True)
                for s in _fixture_statements(variants[index], name)
            ]
            program = _test_program(files, fixtures, body, raises.uses_types)
            if program is not None:
                programs.append(TestProgram(func.lineno, program, _unparsed(body)))
    return programs


def _unparsed(statements: list[ast.stmt]) -> str:
    try:
        return ast.unparse(ast.Module(body=statements, type_ignores=[]))
    except (ValueError, RecursionError):
        return ""


def _combinations(sizes: list[int]) -> list[tuple[int, ...]]:
    """The first `MAX_PARAMS` choices of one variant per fixture, every fixture's second variant
    before any one's third (`asgi=[True, False]` beside a four-param fixture tries both apps)."""
    every = product(*(range(n) for n in sizes))
    return sorted(islice(every, 10_000), key=lambda c: (max(c, default=0), sum(c), c))[:MAX_PARAMS]


def _test_program(
    files: list[_TestFile], fixtures: list[ast.stmt], body: list[ast.stmt], uses_types: bool
) -> str | None:
    """The program: the imports and helpers the fixtures and body read, then both; None when it
    would need pytest or another skipped import."""
    # what the program reads before binding it itself: a conftest's `idx = ...` is no helper of a
    # test that writes its own `idx = Index(...)`
    statements = [*fixtures, *body]
    needed = set(free_names(statements, bound_names(statements)))
    if needed & SKIPPED_IMPORTS:
        return None
    helpers = [h for f in files for h in f.helpers]
    chosen: list[ast.stmt] = []
    for _ in range(3):  # helpers that helpers use, a few levels deep
        chosen = [h for h in helpers if defined_names(h) & needed]
        needed |= {n for h in chosen for n in _names(h)}
    if any(n in SKIPPED_IMPORTS for h in chosen for n in _names(h)):
        return None
    imports: dict[str, ast.stmt] = {}
    for f in files:
        for i in f.imports:
            used = _used_import(i, needed)
            if used is not None:
                imports.setdefault(ast.unparse(used), used)
    if uses_types:
        imports.setdefault("import types as _types", ast.Import(names=[ast.alias("types", "_types")]))
    helper_text: dict[str, ast.stmt] = {}
    for h in chosen:  # a conftest helper of the same text as the test file's is written once
        helper_text.setdefault(ast.unparse(h), h)
    statements = [*imports.values(), *helper_text.values(), *fixtures, *body]
    try:
        return ast.unparse(ast.Module(body=statements, type_ignores=[])) + "\n"
    except (ValueError, RecursionError):
        return None


def _used_import(statement: ast.Import | ast.ImportFrom, needed: set[str]) -> ast.stmt | None:
    """The import with only the names the program reads (a test file imports for all its tests:
    pydantic's `from dirty_equals import IsStr` would fail a program that never uses it); None
    when it binds none of them. A star import stays."""
    names = [
        a
        for a in statement.names
        if a.name == "*"
        or (a.asname or (a.name.split(".")[0] if isinstance(statement, ast.Import) else a.name)) in needed
    ]
    if not names:
        return None
    if isinstance(statement, ast.Import):
        return ast.Import(names=names)
    return ast.ImportFrom(module=statement.module, names=names, level=statement.level)


def conftest_paths(path: str) -> list[str]:
    """The conftest.py files pytest would load for a test file, the nearest first."""
    parents = PurePosixPath(path).parents
    return [str(parent / "conftest.py") if str(parent) != "." else "conftest.py" for parent in parents]


def doc_programs(text: str) -> list[tuple[int, str]]:
    """(line, program) of each Python code block and each run of `>>>` lines of a documentation page,
    run as a session: a block comes with the earlier blocks it builds on (`page_sessions`)."""
    found: list[tuple[int, str]] = []
    # a project's own doctest options (`+SKIPBLOCK`) would stop the standard parser; they are comments
    try:
        examples = doctest.DocTestParser().get_examples(_DOCTEST_OPTION.sub("", text))
    except ValueError:  # an example the parser cannot read: the file's code blocks still count
        examples = []
    run: list[doctest.Example] = []
    for example in [*examples, None]:
        if run and (example is None or example.lineno > run[-1].lineno + run[-1].source.count("\n") + 12):
            found.append((run[0].lineno + 1, "".join(e.source for e in run)))
            run = []
        if example is not None:
            run.append(example)
    snippets, _ = code_blocks(text)
    cursor = 0  # the blocks come in the file's order: each is looked for after the previous one
    for snippet in snippets:
        first = snippet.strip().splitlines()[0] if snippet.strip() else ""
        at = text.find(first, cursor) if first else -1
        cursor = at + 1 if at >= 0 else cursor
        found.append((text[:at].count("\n") + 1 if at >= 0 else 0, snippet))
    return page_sessions(found)


def page_sessions(blocks: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Each block of a page, in page order, with what it builds on from the earlier blocks written in
    front, as a doctest session would have run it: a block that binds a name it reads by an
    assignment, a definition or a mapped class comes whole (and what it builds on in turn); a name
    an earlier block only imports brings that import alone (a block's import of `Flask` does not
    bring the `app.run()` beside it). A block that fails (a deliberate error, a server it needs)
    never reaches a later block that does not read what it binds. A block that does not parse
    stays as it is."""
    parsed = []
    for line, code in sorted(blocks, key=lambda b: b[0]):
        try:
            parsed.append((line, code, ast.parse(code).body))
        except (SyntaxError, ValueError):
            parsed.append((line, code, None))
    sessions = []
    for k, (line, code, body) in enumerate(parsed):
        whole: set[int] = set()
        imports: dict[int, list[ast.stmt]] = {}
        needed = set(free_names(body, bound_names(body))) if body is not None else set()
        for j in range(k - 1, -1, -1):
            earlier = parsed[j][2]
            if not needed:
                break
            if earlier is None:
                continue
            imported = [s for s in earlier if isinstance(s, ast.Import | ast.ImportFrom)]
            others = [s for s in earlier if not isinstance(s, ast.Import | ast.ImportFrom)]
            if bound_names(others) & needed:
                whole.add(j)
                binds = bound_names(earlier)
                needed = (needed - binds) | set(free_names(earlier, binds))
                continue
            wanted = [s for s in imported if bound_names([s]) & needed]
            if wanted:
                imports[j] = wanted
                needed -= bound_names(wanted)
        setup = ""
        for j in range(k):
            if j in whole:
                setup += parsed[j][1].rstrip("\n") + "\n"
            elif j in imports:
                setup += "".join(ast.unparse(s) + "\n" for s in imports[j])
        sessions.append((line, setup + code))
    return sessions


def mine(files: dict[str, str], apis: list[dict]) -> dict[str, list[Mined]]:
    """qualname -> the examples that call it, from tests then docs, at most `TRIED_PER_API` per
    source (a test's variants count once): tests whose own lines call it first, then the shortest;
    bundles keep `PER_API` that run. `apis`: rows with `qualname`, `kind`, `module`."""
    candidates: list[Mined] = []
    for path, text in sorted(files.items()):
        if is_test_file(path):
            near = [files[c] for c in conftest_paths(path) if c in files]
            candidates += [
                Mined(t.code, "tests", f"{path}:{t.line}", t.body) for t in test_programs(path, text, near)
            ]
        elif is_doc_file(path):
            candidates += [Mined(code, "docs", f"{path}:{line}") for line, code in doc_programs(text)]
        elif is_example_file(path):  # a whole script: applications, runnable as they are
            candidates.append(Mined(text, "examples", f"{path}:1"))
    # each candidate's code without its imports, read once for every API's patterns
    bodies = [(m, _without_imports(m.code)) for m in candidates]
    found: dict[str, list[Mined]] = {}
    for api in apis:
        pattern = call_pattern(api["qualname"], api.get("kind", "function"))
        root = str(api.get("module") or api["qualname"]).split(".")[0]
        specific = len(api["qualname"].rsplit(".", 1)[-1]) >= 8  # a doc block may lean on earlier imports
        # a method's name alone matches any object's: its class must be named too, unless the
        # name is distinctive (`req.get_header_as_int(...)` on a request the test client made)
        name = api["qualname"].rsplit(".", 1)[-1]
        owner = (
            api["qualname"].rsplit(".", 2)[-2]
            if api.get("kind") == "method" and api["qualname"].count(".") >= 2 and not _distinctive(name)
            else ""
        )
        calls = partial(_calls, pattern, owner)
        for source in ("tests", "docs", "examples"):
            # a test whose own lines make the call first (pandas' `idx.diff(periods)` beside tests
            # whose fixtures alone name `Index`), then the shortest
            matching = sorted(
                {
                    m
                    for m, body in bodies
                    if m.source == source
                    and calls(body)
                    and (root in m.code or (source != "tests" and specific))
                },
                key=lambda m: (m.body != "" and not calls(m.body), len(m.code), m.origin),
            )
            # one test's variants (its `params=` fixtures') share an origin and count once
            origins = list(dict.fromkeys(m.origin for m in matching))[:TRIED_PER_API]
            found.setdefault(api["qualname"], []).extend(m for m in matching if m.origin in origins)
    return {q: ms for q, ms in found.items() if ms}


def _calls(pattern: re.Pattern[str], owner: str, text: str) -> bool:
    """Whether `text` calls the API: its pattern, and its class named for a method that needs it."""
    return bool(pattern.search(text)) and (not owner or bool(re.search(rf"\b{re.escape(owner)}\b", text)))


def _distinctive(name: str) -> bool:
    """A method name no other class is likely to share: three words or more, 12 characters or more."""
    return len(name) >= 12 and name.strip("_").count("_") >= 2


def _without_imports(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if not line.startswith(("import ", "from ")))


def doctest_namespace(files: dict[str, str]) -> dict[str, str]:
    """Name -> import line, from the project's `conftest.py` files: pytest's fixture idiom
    `doctest_namespace["pd"] = pd` (pandas, numpy) gives every doctest names its docstrings then
    use without importing them. Only names bound by the conftest's own top-level imports count."""
    found: dict[str, str] = {}
    for path, text in sorted(files.items()):
        if PurePosixPath(path).name != "conftest.py":
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        imported: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname or "." not in a.name:
                        imported[a.asname or a.name] = (a.name, None)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        imported[a.asname or a.name] = (node.module, a.name)
        for node in ast.walk(tree):
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if not (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == "doctest_namespace"
                and isinstance(target.slice, ast.Constant)
                and isinstance(name := target.slice.value, str)
                and name.isidentifier()
                and isinstance(node.value, ast.Name)
                and node.value.id in imported
            ):
                continue
            module, attr = imported[node.value.id]
            bound = attr or module
            line = f"from {module} import {attr}" if attr else f"import {module}"
            found.setdefault(name, line if bound == name else f"{line} as {name}")
    return found


def mine_sdist(path: Path, apis: list[dict]) -> SdistFindings:
    """`mine` and `doctest_namespace` over an sdist file (an unreadable archive gives nothing)."""
    try:
        files = read_sdist(path)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError):
        return SdistFindings({}, {})
    return mine_files(files, apis)


def mine_files(files: dict[str, str], apis: list[dict]) -> SdistFindings:
    return SdistFindings(mine(files, apis), doctest_namespace(files))
