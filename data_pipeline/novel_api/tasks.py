"""Novel-API tasks: a context with a `# TODO` line to complete, a description that never names the
API, and execute-then-assert tests; every task is checked against its own reference (C1).

Generators (pluggable, `generator=deterministic|llm`):

- **deterministic** (always works offline): from each bundle's validated examples, the first
  call of the API becomes three tasks. L1: the context imports the module and holds the
  example's setup; the `# TODO` line is the call with its literal arguments. L2: the literal
  arguments become `solve`'s parameters and the module import moves into the masked span.
  L3: the example's setup statements move into the span too (the whole body when there are none).
  An example that never calls the API at top level (a class used as a type, a decorator) gives
  one L1 task whose span is the statement that names it (`_statement_task`).
- **llm**: a served model (OpenAI-compatible, `core/openai_client.py`) writes the reference with
  the prompt template in `configs/novel_api/task_prompt.yaml`; the same harness, spy and C1 apply.

Tests are built by running the reference under the spy with the new version's interpreter
(`core.sandbox`, interpreter option): its output becomes the expected value, its recorded calls
the reference calls (Param_corr compares against them). The assertion message names both values
and their types (`expected X (list), got Y (tuple)`), which the failure classifier reads.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from core.batches import run_all
from core.benchmarks.novelapi import CANDIDATE_FILE, program, read_spy
from core.sandbox import Sandbox
from core.sandbox.declared import unverified_flags
from data_pipeline.novel_api.docsnippets import bound_names, defined_names, free_names

TODO = "# TODO: complete this step"
LEVELS = (1, 2, 3)


@dataclass(frozen=True)
class Draft:
    """A task before its tests exist: where its reference and context come from."""

    id: str
    qualname: str
    level: int
    description: str
    context: str
    reference: str
    call: str  # how the tests call it: "solve()" or "solve(10, 3)"
    use: str = "call"  # call | type (a class the reference uses as a type, never calls)
    generator: str = "deterministic"  # the route that wrote it: deterministic | llm


def strip_name(text: str, bundle: dict[str, Any]) -> str:
    """`text` with every spelling of the API's name replaced, so a description never names it."""
    names = {bundle["qualname"], *bundle.get("paths", []), bundle["qualname"].rsplit(".", 1)[-1]}
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"`?\b{re.escape(name)}\b(\(\))?`?", "the function", text)
    return text


# A full stop after these does not end a sentence.
_ABBREVIATIONS = r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\bcf)(?<!\bNo)"


def first_sentence(text: str) -> str:
    """The text's first sentence, whole: not cut at "e.g." or a version number like "2.0"."""
    text = " ".join(text.split())
    parts = re.split(rf"{_ABBREVIATIONS}(?<=[.!?])\s+(?=[A-Z`(\"'])", text, maxsplit=1)
    return parts[0] if text else ""


def describe(bundle: dict[str, Any], inputs: str) -> str:
    prose = (bundle.get("M") or {}).get("prose") or ""
    first = first_sentence(prose)
    library = bundle["library"]
    text = f"Using the `{library}` library: {first}".rstrip()
    if inputs:
        text += f" Inputs: {inputs}."
    return strip_name(text + " The answer is what `solve` returns.", bundle)


def _executed(stmt: ast.stmt):
    """The nodes of `stmt` that run when it runs and return: not the bodies of the functions,
    lambdas and classes it defines (a call there runs only if something calls them), nor of a
    `try` (a test's expected error: the call there is meant to raise)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Try)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _target_call(tree: ast.Module, short: str) -> tuple[int, ast.Call] | None:
    for index, stmt in enumerate(tree.body):
        for node in _executed(stmt):
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else None
                )
                if name == short or (short == "__init__" and isinstance(func, ast.Name)):
                    return index, node
    return None


EXAMPLES_PER_API = 3  # examples that become tasks, each up to three (L1-L3)
MAX_FAILURES_LISTED = 20  # failed references the manifest lists


def drafts(bundle: dict[str, Any], per_api: int = EXAMPLES_PER_API) -> list[Draft]:
    """Up to three tasks (L1-L3) from each of the first `per_api` examples whose code calls the API
    (the first example's ids are `QUALNAME/L1`.., the k-th's `QUALNAME/e<k>/L1`..)."""
    module = bundle["module"]
    short = bundle["qualname"].rsplit(".", 1)[-1]
    out: list[Draft] = []
    seen: set[str] = set()
    session = ""  # a docstring's doctest is one session: each chunk sees what the earlier ones defined
    for example in bundle.get("E", []):
        code = session + example["code"] if example.get("source") == "doctest" else example["code"]
        if example.get("source") == "doctest":
            session = code.rstrip("\n") + "\n"
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        found = _target_call(tree, short)
        if found is not None:
            index, call = found
            setup = tree.body[:index]
            awaited = any(isinstance(n, ast.Await) and n.value is call for n in ast.walk(tree.body[index]))
            run = Run(awaited, awaited or any(isinstance(n, ast.Await) for s in setup for n in ast.walk(s)))
            levels = _levels(bundle, _imports(module, [*setup, call], bound_names(setup), short),
                             [ast.unparse(s) for s in setup], _qualified(call, module, short), call, run)  # fmt: skip
        else:  # no call at top level: the statement that names it (`a: Dsn`, `@with_config(...)`)
            levels = _statement_task(bundle, tree, module, short)
        if not levels or levels[0].reference in seen:
            continue
        seen.add(levels[0].reference)
        if out:  # a later example's tasks: ids of their own
            tag = f"e{len(seen)}"
            levels = [replace(d, id=d.id.replace("/L", f"/{tag}/L")) for d in levels]
        out += levels
        if len(seen) == per_api:
            break
    return out


def _imports(module: str, nodes: list[ast.AST], bound: set[str], short: str) -> str:
    """The API's module, and the names the nodes read from it (the example's own excepted)."""
    free = [n for n in free_names(nodes, bound) if n != short]
    return f"import {module}\n" + (f"from {module} import {', '.join(free)}\n" if free else "")


def _mentions(node: ast.AST, short: str) -> bool:
    """Whether the node names `short`, as a name or an attribute (an import's alias is neither)."""
    return any(
        (isinstance(n, ast.Name) and n.id == short) or (isinstance(n, ast.Attribute) and n.attr == short)
        for n in ast.walk(node)
    )


def _checked_value(stmt: ast.stmt) -> ast.expr | None:
    """The value an example checks or shows: `assert X == Y` -> X, `print(X)` -> X, a bare expression."""
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare):
        compare = stmt.test
        return compare.left if len(compare.ops) == 1 and isinstance(compare.ops[0], ast.Eq) else None
    if not isinstance(stmt, ast.Expr) or isinstance(stmt.value, ast.Constant):
        return None
    value = stmt.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        return value.args[0] if len(value.args) == 1 and not value.keywords else None
    return value


def _without_alias(stmt: ast.stmt, short: str) -> ast.stmt | None:
    """An import statement without the API's own name (the context must not name it); None if empty."""
    if not isinstance(stmt, ast.ImportFrom):
        return stmt
    names = [a for a in stmt.names if (a.asname or a.name) != short]
    return ast.ImportFrom(module=stmt.module, names=names, level=stmt.level) if names else None


class _Qualify(ast.NodeTransformer):
    """`Short` read as a bare name -> `module.Short`."""

    def __init__(self, module: str, short: str):
        self.module, self.short = module, short

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.short and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.parse(f"{self.module}.{self.short}", mode="eval").body, node)
        return node


def _statement_task(bundle: dict[str, Any], tree: ast.Module, module: str, short: str) -> list[Draft]:
    """An L1 task from an example that never calls the API at top level: a class used as a type
    (pydantic's `a: ClickHouseDsn` in a model: `use="type"`), a function called as a class's
    decorator (`@with_config(...)`) or in its body. The masked span is the first statement that
    names it, the result the value the example then checks (`assert X == ...`, `print(X)`, a bare
    expression); none when the name shows anywhere else (the context would give it away)."""
    body = tree.body
    at = next(
        (
            i
            for i, s in enumerate(body)
            if not isinstance(s, (ast.Import, ast.ImportFrom)) and _mentions(s, short)
        ),
        None,
    )
    if at is None:
        return []
    end = next((j for j in range(at + 1, len(body)) if _checked_value(body[j]) is not None), None)
    if end is None:
        return []
    value = _checked_value(body[end])
    setup = [s for s in (_without_alias(s, short) for s in body[:at]) if s is not None]
    after = body[at + 1 : end]
    if any(_mentions(n, short) for n in [*setup, *after, value]):
        return []
    target = _Qualify(module, short).visit(copy.deepcopy(body[at]))
    imports = _imports(
        module, [*setup, body[at], *after, value], bound_names([*setup, body[at], *after]), short
    )

    def block(statements: list[ast.stmt]) -> str:
        return "".join(f"    {line}\n" for s in statements for line in ast.unparse(s).splitlines())

    head = f"{imports}\n\ndef solve():\n{block(setup)}"
    tail = f"{block(after)}    result = {ast.unparse(value)}\n    return result\n"
    defined = sorted(defined_names(body[at]))
    description = describe(bundle, "")
    if defined:
        description += f" The missing step defines `{'`, `'.join(defined)}`."
    qual = bundle["qualname"]
    reference, context = head + block([target]) + tail, head + f"    {TODO}\n" + tail
    use = "type" if bundle.get("kind") == "class" else "call"
    return [Draft(f"{qual}/L1", qual, 1, description, context, reference, "solve()", use=use)]


def _qualified(call: ast.Call, module: str, short: str) -> str:
    """The call as source, a bare API name qualified with its module."""
    if isinstance(call.func, ast.Name) and call.func.id == short:
        call = ast.Call(
            func=ast.Attribute(value=ast.Name(id=module), attr=short), args=call.args, keywords=call.keywords
        )
    return ast.unparse(call)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


@dataclass(frozen=True)
class Run:
    """How the example ran its target: awaited (`x = await api(...)`: the task keeps the `await`),
    and whether `solve` must be a coroutine (that, or an `await` in the setup); the tests then run
    it under an event loop."""

    awaited: bool = False
    coroutine: bool = False

    def defines(self, params: str) -> str:
        return f"{'async ' if self.coroutine else ''}def solve({params}):\n"

    def calls(self, args: str) -> str:
        return f"__import__('asyncio').run(solve({args}))" if self.coroutine else f"solve({args})"


def _levels(
    bundle: dict, imports: str, setup: list[str], target: str, call: ast.Call, run: Run = Run()
) -> list[Draft]:
    qual = bundle["qualname"]
    head = ast.unparse(ast.parse(target, mode="eval").body.func)  # `Styler(df).map`, not `Styler`
    target = f"await {target}" if run.awaited else target
    body = "".join(f"    {line}\n" for s in setup for line in s.splitlines())
    literals = [a for a in call.args if _literal(a)] + [
        k.value for k in call.keywords if k.arg and _literal(k.value)
    ]
    shown = ", ".join(ast.unparse(a) for a in call.args if _literal(a))
    shown = ", ".join(
        filter(None, [shown, *(ast.unparse(k) for k in call.keywords if k.arg and _literal(k.value))])
    )
    out = []
    description = describe(bundle, shown)
    l1_ref = f"{imports}\n\n{run.defines('')}{body}    result = {target}\n    return result\n"
    l1_ctx = l1_ref.replace(f"    result = {target}\n", f"    {TODO}\n")
    out.append(Draft(f"{qual}/L1", qual, 1, description, l1_ctx, l1_ref, run.calls("")))
    if not literals:
        return out
    params = [f"arg{i}" for i in range(len(literals))]
    mapping = {id(a): p for a, p in zip(literals, params, strict=True)}
    args = [mapping.get(id(a), ast.unparse(a)) for a in call.args]
    keywords = [
        f"{k.arg}={mapping.get(id(k.value), ast.unparse(k.value))}" if k.arg else f"**{ast.unparse(k.value)}"
        for k in call.keywords
    ]
    generic = f"{'await ' if run.awaited else ''}{head}({', '.join(args + keywords)})"
    values = ", ".join(ast.unparse(a) for a in literals)
    signature = run.defines(", ".join(params))
    described = describe(bundle, f"the arguments {', '.join(params)} of `solve`")
    l2_ref = f"{imports}\n\n{signature}{body}    result = {generic}\n    return result\n"
    l2_ctx = f"\n\n{signature}{body}    {TODO}\n    return result\n"
    out.append(Draft(f"{qual}/L2", qual, 2, described, l2_ctx, l2_ref, run.calls(values)))
    span = "".join(f"    {line}\n" for line in imports.splitlines()) + body + f"    result = {generic}\n"
    l3_ref = f"{signature}{span}    return result\n"
    l3_ctx = f"{signature}    {TODO}\n    return result\n"
    out.append(Draft(f"{qual}/L3", qual, 3, described, l3_ctx, l3_ref, run.calls(values)))
    return out


NORM = """
# (a str.format template: braces doubled)
def _norm(value, _depth=0):
    # an iterator (a generator, map, ...) is compared by what it yields
    if hasattr(value, "__next__") and hasattr(value, "__iter__"):
        value = list(value)
    if _depth > 3:
        return value
    if type(value) in (list, tuple):
        return type(value)(_norm(v, _depth + 1) for v in value)
    if type(value) is dict:
        return {{k: _norm(v, _depth + 1) for k, v in value.items()}}
    # an object with the default repr (its address changes every run) is compared by its type and
    # attributes
    if type(value).__repr__ is object.__repr__ and hasattr(value, "__dict__"):
        fields = sorted(vars(value).items(), key=lambda kv: kv[0])
        return (type(value).__name__, {{k: _norm(v, _depth + 1) for k, v in fields if not k.startswith("__")}})
    return value
"""

CAPTURE = (
    NORM
    + """
_value = _norm({call})
print("@@out", repr(repr(_value)), repr(type(_value).__name__))
print("@@out2", repr(repr(_norm({call}))))
"""
)

ASSERT = (
    NORM
    + """
_expected = {expected}
_got = _norm({call})
assert _got == _expected, (
    f"expected {{_expected!r}} ({{type(_expected).__name__}}), got {{_got!r}} ({{type(_got).__name__}})"
)
"""
)

ASSERT_REPR = (
    NORM
    + """
_expected = {expected!r}
_got = _norm({call})
assert repr(_got) == _expected, f"expected {{_expected}} ({type_name}), got {{_got!r}} ({{type(_got).__name__}})"
"""
)


def _parameters(signature: str | None) -> str | None:
    """`name(a, b=2)` -> `(a, b=2)`: the form signature parsers take."""
    return signature[signature.index("(") :] if signature and "(" in signature else signature


def _unique(calls: list[dict]) -> list[dict]:
    seen: dict[str, dict] = {}
    for call in calls:
        seen.setdefault(json.dumps(call, sort_keys=True), call)
    return list(seen.values())


def _tests(out_repr: str, type_name: str, call: str) -> str:
    """Assertions on the reference's captured output: by value when its repr is a literal."""
    try:
        ast.literal_eval(out_repr)
        return ASSERT.format(expected=out_repr, call=call)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ASSERT_REPR.format(expected=out_repr, call=call, type_name=type_name)


def library_unverified(sandbox: Sandbox, library: str) -> bool:
    """Whether programs of ``library`` run in the sandbox's declared unverified mode: the library
    itself loads a module with raw memory access (numpy, ctypes)."""
    return unverified_flags(sandbox, [(f"import {library}\n",)])[0]


@dataclass
class TaskBuilder:
    """Runs references under the spy with the new version's interpreter; counts every drop."""

    sandbox: Sandbox
    dropped: Counter
    # (task id, the error's last line) of references that failed, for the manifest
    failures: list[dict[str, str]] = field(default_factory=list)

    def _failed(self, reason: str, task_id: str, result: Any) -> None:
        self.dropped[reason] += 1
        text = (
            "the reference printed no result (@@out)"
            if result.passed
            else (result.detail or result.stderr or result.status or "").strip()
        )
        self.failures.append(
            {"id": task_id, "reason": reason, "why": text.splitlines()[-1][:300] if text else ""}
        )

    def finish(self, bundle: dict[str, Any], drafts_: list[Draft]) -> list[dict[str, Any]]:
        paths = bundle.get("paths") or [bundle["qualname"]]
        capture = [(program(d.reference, paths, use=d.use), CAPTURE.format(call=d.call)) for d in drafts_]
        tasks = []
        unverified = library_unverified(self.sandbox, bundle["library"])
        results = self.sandbox.run_many(
            capture, candidate_file=CANDIDATE_FILE, unverified=unverified, channel=True
        )
        for draft, result in zip(drafts_, results, strict=True):
            lines = dict(re.findall(r"^(@@out2?) (.*)$", result.stdout, re.MULTILINE))
            if not result.passed or "@@out" not in lines:
                self._failed("reference_fails", draft.id, result)
                continue
            first, type_name = (ast.literal_eval(x) for x in lines["@@out"].rsplit(" ", 1))
            if ast.literal_eval(lines["@@out2"]) != first:
                self.dropped["unstable_output"] += 1
                continue
            spy = read_spy(result.channel) or {}
            tasks.append(
                {
                    "id": draft.id,
                    "qualname": draft.qualname,
                    "library": bundle["library"],
                    "version": bundle.get("version"),
                    "level": draft.level,
                    "description": draft.description,
                    "context": draft.context,
                    "reference": draft.reference,
                    "tests": _tests(first, type_name, draft.call),
                    "paths": paths,
                    "signature": _parameters((bundle.get("S") or {}).get("signature")),
                    "reference_calls": _unique(spy.get("calls", [])),  # the capture calls solve twice
                    "generator": draft.generator,
                    "use": draft.use,
                }
            )
        return self.check_c1(tasks)

    def check_c1(self, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """C1: the reference passes its own tests, with the API called (always checked); a reference
        that uses a class as a type must also fail with the class taken away (else no sample
        would need it: `type_not_needed`)."""
        typed = [t for t in tasks if t.get("use") == "type"]
        jobs = [(program(t["reference"], t["paths"], use=t.get("use", "call")), t["tests"]) for t in tasks]
        jobs += [(program(t["reference"], t["paths"], absent=True, use="type"), t["tests"]) for t in typed]
        unverified = [library_unverified(self.sandbox, t["library"]) for t in [*tasks, *typed]]
        results = (
            self.sandbox.run_many(jobs, candidate_file=CANDIDATE_FILE, unverified=unverified, channel=True)
            if jobs
            else []
        )
        without = {id(t): r.passed for t, r in zip(typed, results[len(tasks) :], strict=True)}
        kept = []
        for task, result in zip(tasks, results[: len(tasks)], strict=True):
            if not result.passed:
                self._failed("c1_failed", task["id"], result)
            elif without.get(id(task)):
                self.dropped["type_not_needed"] += 1
            else:
                kept.append({**task, "c1": True})
        return kept


def build_tasks(
    bundles: list[dict[str, Any]],
    sandbox: Sandbox,
    generate: Callable[[dict[str, Any]], list[Draft]] = drafts,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(tasks, manifest): every bundle yields tasks or a counted reason. Bundles go through
    `core.batches` one at a time, in order (a bundle's drafts are one batch of sandbox runs)."""
    dropped: Counter = Counter()
    builder = TaskBuilder(sandbox, dropped)

    def one(part: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        (bundle,) = part
        made = generate(bundle)
        if not made:
            dropped["no_usable_example"] += 1
            return [[]]
        return [builder.finish(bundle, made)]

    per_bundle = run_all(bundles, one, label="tasks", progress=progress, chunk=1, in_flight=1)
    tasks = [task for kept in per_bundle for task in kept]
    apis_with_tasks = len({t["qualname"] for t in tasks})
    manifest = {
        "bundles": len(bundles),
        "apis_with_tasks": apis_with_tasks,
        "tasks": len(tasks),
        "per_level": dict(Counter(t["level"] for t in tasks)),
        "per_generator": dict(Counter(t["generator"] for t in tasks)),  # how many each route gave
        "dropped": dict(dropped),
        "reference_failures": builder.failures[:MAX_FAILURES_LISTED],
    }
    return tasks, manifest


def write_jsonl(rows: list[dict[str, Any]], path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)
