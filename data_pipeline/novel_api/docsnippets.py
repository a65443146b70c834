"""An API's documented examples: the doctests and Python code blocks of its docstring, found and run.

A bundle keeps only examples that run cleanly against the library's new version, so that the
knowledge shown to a model is true of that version. They are the library's own documented examples,
not model output, so they run in a plain subprocess of the new version's interpreter (isolated mode,
a temporary working directory, a minimal environment, stdin closed, each example under a timeout that
kills the whole process group) rather than in the sandbox. One child process runs all examples in
turn, as `doctest.testmod` runs a module's docstrings, and is restarted after one hangs or kills it.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import inspect
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK, FAILED, TIMEOUT = "ok", "failed", "timeout"
PYTHON_LANGUAGES = {"", "python", "py", "python3", "py3"}

_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(?:code-block|code|sourcecode)::\s*(\S*)\s*$")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")
_LITERAL_INTRO = re.compile(r"^(\s*)(?!\.\.\s)(.*?)::\s*$")


@dataclass
class DocExamples:
    """What a docstring offers: `doctest` (the text to run as one doctest, None without examples),
    `chunks` (its examples as (code, expected output) pairs, split after each output), `snippets`
    (Python code blocks) and `text` (the docstring without doctests and Python code blocks)."""

    doctest: str | None
    chunks: list[tuple[str, str]]
    snippets: list[str]
    text: str


def find_examples(doc: str | None) -> DocExamples:
    """The doctests and Python code blocks (`.. code-block:: python`, `::` literal blocks that parse,
    Markdown fences) of a docstring, and its text without them. Examples marked `+SKIP` are never
    verified, so they are left out."""
    cleaned = inspect.cleandoc(doc or "")
    pieces = doctest.DocTestParser().parse(cleaned)
    examples = [p for p in pieces if isinstance(p, doctest.Example) and not p.options.get(doctest.SKIP)]
    text = "".join(p for p in pieces if isinstance(p, str))
    snippets, text = code_blocks(text)
    return DocExamples(cleaned if examples else None, _chunks(examples), snippets, _tidy(text))


# ------------------------------------------------------------------------ names an example uses
# What every module has without defining it (a script's `__file__`).
MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__", "__cached__"}


def defined_names(statement: ast.stmt) -> set[str]:
    """The names a statement itself defines: a function's or class's name, assignment targets;
    for an `if` or `try` at top level, what its branches define or import (falcon's conftest sets
    `has_cython` in a `try` whose `except ImportError` sets it otherwise)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(statement, (ast.If, ast.Try)):
        inner = [*statement.body, *statement.orelse]
        if isinstance(statement, ast.Try):
            inner += [*statement.finalbody, *(s for h in statement.handlers for s in h.body)]
        names = {
            a.asname or a.name.split(".")[0]
            for s in inner
            if isinstance(s, (ast.Import, ast.ImportFrom))
            for a in s.names
        }
        return names.union(*(defined_names(s) for s in inner))
    return set()


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def bound_names(statements: list[ast.stmt]) -> set[str]:
    """Names the statements bind in their own scope: assignments, imports, definitions, `except
    ... as` names, inside `if`/`try`/`for`/`with` blocks too, but not what a function, class, lambda
    or comprehension binds for itself (a fixture's local `app` is not the module's `app`)."""
    bound: set[str] = set()
    stack: list[ast.AST] = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue  # its body is its own scope
        if isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return bound


def free_names(nodes: list[ast.AST], bound: set[str]) -> list[str]:
    """Names the nodes read that resolve to the module and that neither `bound` nor the builtins
    give, in the order they first appear. A function's parameters and locals, a lambda's
    parameters and a comprehension's targets resolve in their own scope (an inner `def wrapper`
    read by the function that defines it is no free name)."""
    import builtins

    names: list[str] = []

    def visit(node: ast.AST, local: frozenset[str]) -> None:
        if isinstance(node, _SCOPES):
            if isinstance(node, ast.Lambda):
                outer: list[ast.AST] = [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
                body: list[ast.AST] = [node.body]
            else:
                outer = list(node.decorator_list)
                if isinstance(node, ast.ClassDef):
                    outer += [*node.bases, *(k.value for k in node.keywords)]
                else:
                    outer += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
                body = list(node.body)
            for child in outer:
                visit(child, local)
            inner = local | bound_names([s for s in body if isinstance(s, ast.stmt)])
            if not isinstance(node, ast.ClassDef):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
                inner |= {p.arg for p in params}
            for child in body:
                visit(child, frozenset(inner))
            return
        if isinstance(node, _COMPREHENSIONS):
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            for child in ast.iter_child_nodes(node):
                visit(child, local | targets)
            return
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in local
            and node.id not in bound
            and not hasattr(builtins, node.id)
            and node.id not in MODULE_NAMES
            and node.id not in names
        ):
            names.append(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, local)

    for node in nodes:
        visit(node, frozenset())
    return names


def needed_imports(code: str, namespace: dict[str, str]) -> str:
    """The import lines of `namespace` (name -> import) for the names `code` reads but never binds."""
    if not namespace:
        return ""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return ""
    used = set(free_names(tree.body, bound_names(tree.body)))
    return "".join(namespace[name] + "\n" for name in sorted(namespace) if name in used)


def with_namespace(found: DocExamples, namespace: dict[str, str]) -> DocExamples:
    """`found` with the imports its examples take for granted (the project's doctest namespace:
    pandas' docstrings use `pd` unimported) written in, so each example stands alone."""
    if not namespace:
        return found
    doctest_text, chunks = found.doctest, found.chunks
    head = needed_imports("\n".join(code for code, _ in chunks), namespace)
    if doctest_text and head and chunks:
        doctest_text = "".join(f">>> {line}\n" for line in head.splitlines()) + "\n" + doctest_text
        chunks = [(head + chunks[0][0], chunks[0][1]), *chunks[1:]]
    snippets = [needed_imports(s, namespace) + s for s in found.snippets]
    return DocExamples(doctest_text, chunks, snippets, found.text)


def _chunks(examples: list[doctest.Example]) -> list[tuple[str, str]]:
    """Consecutive examples up to one with expected output, so each output follows its code."""
    chunks, code = [], ""
    for example in examples:
        code += example.source
        if example.want:
            chunks.append((code.rstrip("\n"), example.want.rstrip("\n")))
            code = ""
    if code:
        chunks.append((code.rstrip("\n"), ""))
    return chunks


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block(lines: list[str], start: int, indent: int) -> int:
    """The end (exclusive) of the indented block starting at `start`: lines indented deeper than
    `indent`, or blank; trailing blank lines are not part of it."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def code_blocks(text: str) -> tuple[list[str], str]:
    """Python code blocks of `text` (in order) and `text` without them. Explicit Python blocks leave
    the text even when they do not parse (they are code, not prose); a `::` literal block counts
    only when it parses, and its `Example::` line then reads `Example:`."""
    lines = text.split("\n")
    snippets, kept, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        directive, fence, literal = _DIRECTIVE.match(line), _FENCE.match(line), _LITERAL_INTRO.match(line)
        if directive:
            body = i + 1
            while body < len(lines) and lines[body].strip().startswith(":"):  # directive options
                body += 1
            while body < len(lines) and not lines[body].strip():
                body += 1
            end = _block(lines, body, _indent(line)) if body < len(lines) else body
            if directive.group(2).lower() in PYTHON_LANGUAGES:
                _take(textwrap.dedent("\n".join(lines[body:end])), snippets)
                i = end
                continue
            kept += lines[i:end]
            i = end
            continue
        if fence:
            close = i + 1
            while close < len(lines) and lines[close].strip() != fence.group(2):
                close += 1
            if fence.group(3).lower() in PYTHON_LANGUAGES:
                _take(textwrap.dedent("\n".join(lines[i + 1 : close])), snippets)
            else:
                kept += lines[i : close + 1]
            i = close + 1
            continue
        if literal:
            body = i + 1
            while body < len(lines) and not lines[body].strip():
                body += 1
            end = _block(lines, body, _indent(line)) if body < len(lines) else body
            code = textwrap.dedent("\n".join(lines[body:end]))
            if end > body and _parses(code) and not code.lstrip().startswith(">>>"):
                snippets.append(code.strip("\n"))
                intro = line.rstrip()[:-1].rstrip()
                if intro.strip():
                    kept.append(intro if intro.endswith(":") else intro + ":")
                i = end
                continue
        kept.append(line)
        i += 1
    return snippets, "\n".join(kept)


def _take(code: str, snippets: list[str]) -> None:
    code = code.strip("\n")
    if code.strip() and not code.lstrip().startswith(">>>") and _parses(code):
        snippets.append(code)


def _tidy(text: str) -> str:
    """No runs of blank lines and no trailing whitespace where examples were taken out."""
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


# ------------------------------------------------------------------------------------------ running
@dataclass
class Unit:
    """One example run: a docstring's doctest (`kind="doctest"`, `text`) with the defining module's
    namespace as globals, or a snippet (`kind="snippet"`, `text`) run as a script after
    `import <module>` and `from <module> import *`; both see the library's top-level public names
    too (documentation writes `Flask`, not `flask.app.Flask`), the module's own winning."""

    kind: str
    module: str
    qualname: str
    text: str


@dataclass
class Outcome:
    status: str  # ok | failed | timeout
    why: str = ""


@dataclass
class _Events:
    proc: subprocess.Popen
    buffer: bytes = b""
    lines: list[bytes] = field(default_factory=list)

    def next(self, deadline: float) -> dict[str, Any] | str:
        """The child's next event, "eof" when it exited, "timeout" when `deadline` passed first."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while not self.lines:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            data = os.read(fd, 1 << 16)
            if not data:
                return "eof"
            *complete, self.buffer = (self.buffer + data).split(b"\n")
            self.lines += complete
        try:
            return json.loads(self.lines.pop(0))
        except json.JSONDecodeError:
            return "eof"


# The child: standard library only, for any Python >= 3.8. Reports go to a duplicate of fd 1; the
# examples' own output goes to /dev/null (a doctest's is captured by the runner).
CHILD = r"""
import ast, contextlib, doctest, importlib, json, os, sys, traceback
TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
report = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
def send(**event):
    report.write(json.dumps(event) + "\n")
    report.flush()
def defining_module(module, qualname):
    mod = importlib.import_module(module)
    obj = mod
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
        name = getattr(obj, "__module__", None)
        if isinstance(name, str) and name:
            return importlib.import_module(name)
    except Exception:
        pass  # no defining module to be found: the module the API was listed in serves
    return mod
def run_doctest(unit):
    mod = defining_module(unit["module"], unit["qualname"])
    top = sys.modules.get(unit["module"].split(".")[0])
    globs = {k: v for k, v in vars(top).items() if not k.startswith("_")} if top else {}
    globs.update(mod.__dict__)  # the defining module's own names win
    test = doctest.DocTestParser().get_doctest(
        unit["text"], globs, unit["qualname"], getattr(mod, "__file__", None), 0)
    out = []
    runner = doctest.DocTestRunner(
        verbose=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=out.append, clear_globs=True)
    ok = result.failed == 0 and result.attempted > 0
    return ok, "" if ok else ("".join(out) or "no example ran")[-1500:]
with open(sys.argv[1]) as f:
    units = json.load(f)
for module in sorted({u["module"] for u in units}):
    try:
        importlib.import_module(module)
    except BaseException:
        pass  # a warm-up only: an example whose module fails to import reports that failure itself
send(e="ready")
for index, unit in enumerate(units):
    send(e="start", i=index)
    ok, why = False, ""
    try:
        if unit["kind"] == "doctest":
            ok, why = run_doctest(unit)
            numpy = sys.modules.get("numpy")
            if not ok and numpy is not None:
                # numpy 2 prints np.float64(0.0) where docstrings written before it show 0.0: numpy's
                # own advice for such doctests is its 1.25 printing, tried once
                try:
                    before = numpy.get_printoptions()
                    numpy.set_printoptions(legacy="1.25")
                except Exception:
                    before = None
                if before is not None:
                    try:
                        ok, _ = run_doctest(unit)
                    finally:
                        numpy.set_printoptions(**before)
        else:
            # as a script in the work folder would see itself (a test helper's `Path(__file__)`)
            scope = {"__name__": "__main__", "__builtins__": __builtins__,
                     "__file__": os.path.join(os.getcwd(), "example.py")}
            m = unit["module"]
            root = m.split(".")[0]
            # the library's top-level names first (docs write `Flask`, not `flask.app.Flask`); a top
            # level that fails to import leaves the module's own import to report it
            with contextlib.suppress(BaseException):
                exec("from " + root + " import *", scope)
            exec("import " + m + "\nfrom " + m + " import *", scope)
            # top-level `await` (an async library's docs, an async test's body) runs under an event loop
            code = compile(unit["text"], "<snippet>", "exec", flags=TOP_LEVEL_AWAIT)
            awaited = eval(code, scope)
            if awaited is not None:
                import asyncio
                asyncio.run(awaited)
            ok = True
    except BaseException:
        why = "".join(traceback.format_exception_only(*sys.exc_info()[:2]))[-1500:]
    send(e="end", i=index, ok=ok, why=why)
"""


def child_env(home: str) -> dict[str, str]:
    """A minimal environment: no credentials or proxies of ours leak into a library's examples."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
    }


def run_examples(
    python: str,
    units: list[Unit],
    timeout_s: float = 10.0,
    progress: Callable[[int, int], None] | None = None,
    import_timeout_s: float | None = None,
) -> list[Outcome]:
    """Run every unit with `python` (the new version's interpreter); one outcome per unit, in order.
    A unit still running `timeout_s` after it started is killed (with its process group) and the
    rest go on in a fresh child; so do they after a unit that ends the process. The modules are
    imported once before the first unit, within `import_timeout_s` (default max(60, timeout_s))."""
    outcomes: dict[int, Outcome] = {}
    import_timeout = import_timeout_s if import_timeout_s is not None else max(60.0, timeout_s)

    def report() -> None:
        if progress:
            progress(len(outcomes), len(units))

    with tempfile.TemporaryDirectory(prefix="novel-examples-") as work:
        while len(outcomes) < len(units):
            pending = [i for i in range(len(units)) if i not in outcomes]
            _run_child(python, units, pending, outcomes, timeout_s, import_timeout, Path(work), report)
    return [outcomes[i] for i in range(len(units))]


def _run_child(
    python: str,
    units: list[Unit],
    pending: list[int],
    outcomes: dict[int, Outcome],
    timeout_s: float,
    import_timeout: float,
    work: Path,
    report: Callable[[], None],
) -> None:
    """One child over `pending`; records an outcome for at least the first pending unit."""
    listing = work / "units.json"
    listing.write_text(json.dumps([vars(units[i]) for i in pending]))
    proc = subprocess.Popen(
        [python, "-I", "-c", CHILD, str(listing)],
        cwd=work,
        env=child_env(str(work)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    events = _Events(proc)
    current: int | None = None
    try:
        deadline = time.monotonic() + import_timeout
        while True:
            event = events.next(deadline)
            if isinstance(event, str):  # timeout or eof
                if current is not None:
                    status = TIMEOUT if event == "timeout" else FAILED
                    outcomes[pending[current]] = Outcome(status, f"{event} while running")
                else:  # between examples: the interpreter or the library's import is broken
                    status = TIMEOUT if event == "timeout" else FAILED
                    for i in pending:
                        outcomes.setdefault(i, Outcome(status, f"child {event} outside an example"))
                report()
                return
            if event["e"] == "start":
                current = event["i"]
            elif event["e"] == "end":
                outcomes[pending[event["i"]]] = Outcome(OK if event["ok"] else FAILED, event.get("why", ""))
                current = None
                report()
                if len(outcomes) == len(units):
                    return
            deadline = time.monotonic() + timeout_s
    finally:
        _kill(proc)


def _kill(proc: subprocess.Popen) -> None:
    """End the child and anything an example started in its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
