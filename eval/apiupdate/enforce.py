"""The enforcing sandbox: a program wrapper over the sandbox, a compile stage, and the outcome of a run.

`run_enforced` takes (code, modification, tests, entry point) jobs. Each goes through the
**compile stage** first (`compile_stage`: degenerate generation, `compile()`, the entry
point's definition, and an AST check that calls of the modified API match its new
signature); a sample that fails it is not executed. The rest run in the existing sandbox as
one program: `runtime.py`'s source, then `apiupdate_main(spec, code)` (the tests go to the sandbox apart), which
runs the code against the modified API and prints the call counts. `Outcome` joins the
sandbox's verdict, the counts and the compile stage into one taxonomy class (`OUTCOMES`,
precedence written in `classify`).

Adoption is the study's definition, decided by verdicts alone: a sample adopts when it passes
with the modified API and fails in a second run where the API is absent (neither its old nor its
new name exists); one that passes there too is a workaround. The counts run in the candidate's
process and could be edited by it, so they only tell the failure classes apart.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.benchmarks.apiupdate import Modification
from core.sandbox import ExecutionResult, Sandbox, SandboxLimits, recording
from core.sandbox.declared import unverified_flags
from core.sandbox.reports import last_report
from core.signatures import Signature
from eval.apiupdate.apis import api_calls, references, roots_of

RUNTIME_SOURCE = (
    Path(recording.__file__).read_text() + (Path(__file__).resolve().parent / "runtime.py").read_text()
)
CANDIDATE_FILE = "<candidate>"  # the runtime compiles the sample under this name
# The outcome taxonomy, in the study's groups; `classify` assigns exactly one per sample.
OUTCOMES = {
    "adoption": "passed, and called the new API",
    "workaround": "passed without calling the new API",
    "syntax_error": "compilation: the code does not compile",
    "degenerate": "compilation: empty, a line repeated 8+ times in a row, or an entry point with no body",
    "invalid_definition": "compilation: the entry point is missing or takes other positional arguments",
    "old_api": "API: the old API was used (old name, S2's call without the new argument, S3's old order)",
    "api_misuse": "API: the new API was called with arguments its signature rejects",
    "fabricated_api": "API: a name or attribute that does not exist (NameError, AttributeError, ImportError in the code)",
    "return_type_mismatch": "API: an S4 result was used as the old return type",
    "runtime_exception": "another exception, a timeout or a resource limit",
    "test_failure": "ran to a failed assertion in the tests",
}
COMPILE_FAILURES = ("syntax_error", "degenerate", "invalid_definition", "old_api", "api_misuse")
REPEAT_LIMIT = 8
_STATIC_KINDS = {
    ast.Lambda: "callable",
    ast.List: "iterable",
    ast.Tuple: "iterable",
    ast.Set: "iterable",
    ast.Dict: "iterable",
    ast.ListComp: "iterable",
    ast.SetComp: "iterable",
    ast.DictComp: "iterable",
    ast.GeneratorExp: "iterable",
    ast.JoinedStr: "iterable",
}
_TYPE_NAMES = frozenset(
    [
        "int",
        "str",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "bytes",
        "complex",
        "frozenset",
        "type",
        "object",
    ]
)


@dataclass
class Outcome:
    """What one sample did in the modified environment."""

    outcome: str
    compiles: bool
    passed: bool
    adopted: bool
    status: str  # the sandbox's status, or "not_run" when the compile stage stopped it
    counts: dict[str, int] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------ compile stage
def _degenerate(code: str) -> bool:
    if not code.strip():
        return True
    run, last = 0, None
    for line in code.splitlines():
        if not line.strip():
            continue
        run = run + 1 if line == last else 1
        last = line
        if run >= REPEAT_LIMIT:
            return True
    return False


def _trivial(body: list[ast.stmt]) -> bool:
    """A body with nothing but a docstring, `pass`, `...` or `raise NotImplementedError`."""
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.unparse(stmt):
            continue
        return False
    return True


def entry_parameters(source: str, entry_point: str) -> int | None:
    """How many positional arguments the module-level function `entry_point` of `source` takes."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            return len(node.args.posonlyargs) + len(node.args.args)
    return None


def _definition_problem(tree: ast.Module, entry_point: str, n_params: int | None) -> str | None:
    defs = [
        n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry_point
    ]
    if not defs:
        bound = any(
            isinstance(n, (ast.Assign, ast.ImportFrom, ast.Import, ast.ClassDef))
            and entry_point in {getattr(t, "id", None) for t in ast.walk(n)} | {getattr(n, "name", None)}
            for n in tree.body
        )
        return None if bound else "invalid_definition"
    func = defs[-1]
    if _trivial(func.body):
        return "degenerate"
    if n_params is None:
        return None
    args = func.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    if (positional < n_params and args.vararg is None) or required > n_params:
        return "invalid_definition"
    return None


def _static_kind(node: ast.expr) -> str | None:
    for kind, name in _STATIC_KINDS.items():
        if isinstance(node, kind):
            if (
                kind is ast.Tuple
                and node.elts
                and all(isinstance(e, ast.Name) and e.id in _TYPE_NAMES for e in node.elts)
            ):
                return "classinfo"
            return name
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "none"
        return "iterable" if isinstance(node.value, (str, bytes)) else "scalar"
    if isinstance(node, ast.Name) and node.id in _TYPE_NAMES:
        return "classinfo"
    return None


_ROLE_FITS = {
    "any": {"callable", "iterable", "classinfo", "scalar", "none"},
    "callable": {"callable", "classinfo"},
    "callable_or_none": {"callable", "classinfo", "none"},
    "iterable": {"iterable"},
    "classinfo": {"classinfo"},
    "not_classinfo": {"callable", "iterable", "scalar", "none"},
    "existing_path": {"iterable"},  # whether a path exists is known only when the program runs
    "path": {"iterable"},
}


def _old_order(call: ast.Call, mod: Modification) -> bool:
    """S3: both swapped arguments' kinds are known statically and only the old order fits them."""
    assert mod.roles is not None and mod.swap is not None
    if len(call.args) < 2 or any(isinstance(a, ast.Starred) for a in call.args[:2]):
        return False
    kinds = [_static_kind(a) for a in call.args[:2]]
    if None in kinds:
        return False
    old = list(mod.roles)
    new = [old[1], old[0]]
    fits = lambda roles: all(k in _ROLE_FITS[r] for r, k in zip(roles, kinds, strict=True))  # noqa: E731
    return fits(old) and not fits(new)


def _signature_problem(call: ast.Call, mod: Modification) -> str | None:
    """old_api / api_misuse for one call of the modified API, judged from its arguments' shape."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None  # *args / **kwargs: only the run can tell
    placeholders = [None] * len(call.args)
    keywords = {k.arg: None for k in call.keywords}
    if _binds(mod.signature, placeholders, keywords):
        if mod.type == "S3" and _old_order(call, mod):
            return "old_api"
        if mod.type == "S2":
            value = next((k.value for k in call.keywords if k.arg == mod.param), None)
            if isinstance(value, ast.Constant) and value.value not in ("raise", "return_none"):
                return "api_misuse"
        return None
    if mod.type == "S2" and mod.param not in keywords and _binds(mod.old_signature, placeholders, keywords):
        return "old_api"
    return "api_misuse"


def _binds(signature: str, args: list, kwargs: dict) -> bool:
    try:
        Signature.from_text(signature).to_inspect().bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def compile_stage(code: str, mod: Modification, entry_point: str, n_params: int | None) -> str | None:
    """None when the sample goes on to run, else the outcome that stops it (see OUTCOMES)."""
    if _degenerate(code):
        return "degenerate"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(code, "<candidate>", "exec", dont_inherit=True)
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "syntax_error"
    problem = _definition_problem(tree, entry_point, n_params)
    if problem:
        return problem
    if mod.type == "none":
        return None
    if mod.type == "R1" and references(tree, mod.api):
        return "old_api"
    for call in api_calls(tree, roots_of(mod.api)):
        if call.api == mod.new_api:
            problem = _signature_problem(call.node, mod)
            if problem:
                return problem
    return None


# ------------------------------------------------------------------------------ the run
def program(code: str, mod: Modification, absent: bool = False) -> str:
    """The text the sandbox runs, with the tests passed apart (`candidate_file=CANDIDATE_FILE`,
    `channel=True`): the runtime, then one call that runs `code` (`absent`: in an environment
    without the API, for the adoption check)."""
    spec = {**mod.spec(), "absent": absent}
    return f"{RUNTIME_SOURCE}\n\napiupdate_main({spec!r}, {code!r})\n"


def read_report(channel: str) -> dict[str, Any] | None:
    """The runtime's report (``ExecutionResult.channel``), or None when the run never sent one."""
    return last_report(channel, "apiupdate")


def classify(
    result: ExecutionResult, report: dict[str, Any] | None, passes_without: bool = False
) -> tuple[str, bool]:
    """(outcome, passed) for a sample that was run. Precedence: a pass (the sandbox's verdict and
    no old-API call) is adoption, or workaround when it also passes without the API
    (`passes_without`, the second run's verdict); then old_api, api_misuse, return_type_mismatch
    from the counts; then fabricated_api from the exception; then test_failure (an
    AssertionError in the tests); anything else is runtime_exception."""
    counts = (report or {}).get("counts") or {}
    error = (report or {}).get("error") or {}
    if result.passed and report is not None and not counts.get("old"):
        return ("workaround" if passes_without else "adoption"), True
    if counts.get("old"):
        return "old_api", False
    if counts.get("bad"):
        return "api_misuse", False
    if counts.get("mismatch"):
        return "return_type_mismatch", False
    kind = error.get("type")
    if (
        kind in ("NameError", "AttributeError", "ImportError", "ModuleNotFoundError")
        and error.get("where") == "<candidate>"
    ):
        return "fabricated_api", False
    if kind == "AssertionError" and error.get("phase") == "tests":
        return "test_failure", False
    return "runtime_exception", False


@dataclass(frozen=True)
class EnforcedJob:
    code: str
    modification: Modification
    tests: str
    entry_point: str
    n_params: int | None = None


def run_enforced(
    sandbox: Sandbox, jobs: Sequence[EnforcedJob], limits: SandboxLimits | None = None
) -> list[Outcome]:
    """The outcome of every job, in order: the compile stage, then one sandbox run each."""
    outcomes: list[Outcome | None] = [None] * len(jobs)
    runnable: list[tuple[int, str]] = []
    for i, job in enumerate(jobs):
        stopped = compile_stage(job.code, job.modification, job.entry_point, job.n_params)
        if stopped is None:
            runnable.append(i)
        else:
            outcomes[i] = Outcome(stopped, compiles=False, passed=False, adopted=False, status="not_run")
    programs = [(program(jobs[i].code, jobs[i].modification), jobs[i].tests) for i in runnable]
    unverified = _declared(sandbox, [jobs[i] for i in runnable])
    results = _run(sandbox, programs, limits, unverified)
    without = _passes_without(
        sandbox, [jobs[i] for i, r in zip(runnable, results, strict=True) if r.passed], limits
    )
    for i, result in zip(runnable, results, strict=True):
        report = read_report(result.channel)
        outcome, passed = classify(result, report, result.passed and next(without))
        counts = (report or {}).get("counts") or {}
        outcomes[i] = Outcome(
            outcome,
            compiles=True,
            passed=passed,
            adopted=outcome == "adoption",
            status=result.status,
            counts=counts,
            error=(report or {}).get("error"),
            detail=result.detail[:300],
        )
    return outcomes  # type: ignore[return-value]


def _passes_without(sandbox: Sandbox, jobs: Sequence[EnforcedJob], limits: SandboxLimits | None):
    """Whether each job also passes with its API absent: the second run that decides adoption."""
    programs = [(program(j.code, j.modification, absent=True), j.tests) for j in jobs]
    return iter([r.passed for r in _run(sandbox, programs, limits, _declared(sandbox, jobs))])


def _run(sandbox: Sandbox, programs: list[tuple[str, str]], limits, unverified: list[bool]) -> list:
    """The wrapper programs' results (the runtime reports through the sandbox's channel)."""
    if not programs:
        return []
    return sandbox.run_many(
        programs, limits=limits, candidate_file=CANDIDATE_FILE, unverified=unverified, channel=True
    )


def _declared(sandbox: Sandbox, jobs: Sequence[EnforcedJob]) -> list[bool]:
    """The declared unverified mode, from what the benchmark itself imports: the tests and the
    modified API's module (never the sample)."""
    return unverified_flags(sandbox, [(j.tests, f"import {j.modification.module}\n") for j in jobs])


def calls_api(code: str, api: str) -> bool:
    """Whether `code` (statically) calls `api`; False when it does not parse."""
    try:
        return any(call.api == api for call in api_calls(code, roots_of(api)))
    except (SyntaxError, ValueError, RecursionError):
        return False
