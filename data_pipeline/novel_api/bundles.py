"""Knowledge bundles of the novel APIs: specification S, verified examples E, mechanism M.

`build_bundles(OUT)` reads discovery's `apis.jsonl` (kept rows) and `discovery.json` and writes one
bundle per usable API to `bundles.jsonl`, with the counts in `bundles.json`:

    {"qualname", "library", "version" (the new one), "license", "paths", "module",
     "S": {"name", "signature": "name(params)", "params": [{"name", "type", "default", "description"}],
           "returns": {"type", "description"} | null},
     "E": [{"code", "output", "source": "doctest" | "docstring" | "tests" | "docs", "origin"?}],
     "M": {"prose", "code"}}

S comes from the signature text plus the docstring (numpy, google or rest style, by
`docstring_parser`); E from the docstring's doctests and Python code blocks, and from the library's
own tests and documentation files (`mining.py`, each with its `origin`, path:line in the sdist),
each run against the new version (`docsnippets.py`) and kept only when it runs cleanly; M from the docstring's description
and the API's source, docstrings stripped, with the same-module functions it calls placed before it.
An API is dropped, with its reason counted, when it has no signature (`no_signature`), its source
cannot be read (`source_unreadable`) or none of its examples runs (`no_valid_example`), checked in
that order so that examples run only for APIs that can become bundles. How the parts are shown to a
model is `core.knowledge.render_knowledge` (re-exported here), shared with evaluation.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import os
import re
import tokenize
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import docstring_parser

from core.errors import UserError
from core.knowledge import CELL_PRESETS, render_knowledge
from core.problems import read_records
from core.signatures import Signature, SignatureError
from data_pipeline.novel_api.docsnippets import (
    OK,
    TIMEOUT,
    DocExamples,
    Outcome,
    Unit,
    find_examples,
    needed_imports,
    run_examples,
    with_namespace,
)
from data_pipeline.novel_api.mining import PER_API, Mined

__all__ = [
    "CELL_PRESETS",
    "DROP_REASONS",
    "build_bundles",
    "make_spec",
    "read_definition",
    "render_knowledge",
]

DROP_REASONS = ("no_signature", "source_unreadable", "no_valid_example")
HELPER_DEPTH = 2
MAX_FAILURES_LISTED = 20
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_EXAMPLES_HEADER = re.compile(r"^\s*(examples?|for example|usage|example usage)\s*:{0,2}\s*$", re.IGNORECASE)
# S names variadic parameters as the signature writes them: `*args`, `**kw`.
_STARS = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}


# ------------------------------------------------------------------------------------------ S
API_FIELDS = (
    "qualname",
    "module",
    "kept",
    "signature",
    "doc",
    "source_file",
    "lineno",
)  # what a bundle reads


def parse_doc(text: str) -> docstring_parser.Docstring | None:
    """The docstring in whichever style fits best (numpy, google, rest); None when none does."""
    try:
        return docstring_parser.parse(text, style=docstring_parser.DocstringStyle.AUTO)
    except docstring_parser.ParseError:
        return None


def make_spec(row: dict[str, Any], doc: docstring_parser.Docstring | None) -> dict[str, Any] | None:
    """S for an apis.jsonl row: the signature's parameters with the docstring's types and
    descriptions (the signature's annotation wins over a documented type); None without a
    signature (a class without one takes `(*args, **kwargs)`) or when it is not a Python
    parameter list (`core.signatures`)."""
    # a class whose constructor Python cannot describe (an exception taking a builtin's __init__)
    # is called with whatever its base takes
    text = row.get("signature") or ("(*args, **kwargs)" if row.get("kind") == "class" else "")
    try:
        signature = Signature.from_text(text)
    except SignatureError:
        return None
    documented: dict[str, docstring_parser.DocstringParam] = {}
    for param in doc.params if doc else []:
        for name in param.arg_name.split(","):
            documented.setdefault(name.strip().lstrip("*"), param)
    params = []
    for parameter in signature.parameters:
        about = documented.get(parameter.name)
        params.append(
            {
                "name": _STARS.get(parameter.kind, "") + parameter.name,
                "type": parameter.annotation or (about.type_name if about else None),
                "default": parameter.default,
                "description": (about.description or None) if about else None,
            }
        )
    doc_returns = doc.returns if doc else None
    returns = None
    if signature.returns or doc_returns:
        returns = {
            "type": signature.returns or (doc_returns.type_name if doc_returns else None),
            "description": (doc_returns.description or None) if doc_returns else None,
        }
    qualname = row["qualname"]
    return {
        "name": qualname,
        "signature": f"{qualname}{text}",
        "params": params,
        "returns": returns,
    }


def prose(doc: docstring_parser.Docstring | None, fallback: str) -> str:
    """M's prose: short and long description, without the parameter/returns sections and without
    leftover "Examples:" headers whose examples went to E."""
    if doc is None:
        text = fallback
    else:
        text = "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
    lines = [line for line in text.split("\n") if not _EXAMPLES_HEADER.match(line)]
    lines = [line for i, line in enumerate(lines) if not _dangling(lines, i)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _dangling(lines: list[str], i: int) -> bool:
    """A line that introduces something (`For example:`, `Usage::`) whose block went to E: the next
    non-blank line is not indented under it, or there is none."""
    if not lines[i].rstrip().endswith(":"):
        return False
    indent = len(lines[i]) - len(lines[i].lstrip())
    following = next((line for line in lines[i + 1 :] if line.strip()), None)
    return (
        following is None
        or len(following) - len(following.lstrip()) <= indent
        and not re.match(r"\s*([-*+]|\d+[.)])\s", following)
    )


# ------------------------------------------------------------------------------------------ M code
def read_definition(source_file: str | None, lineno: int | None, qualname: str) -> str | None:
    """The API's source (its def/class at `lineno`, else found by qualname), docstrings stripped,
    after the module-level functions of the same file it calls by bare name (to depth 2, in file
    order); None when the file cannot be read or parsed or the definition is not in it."""
    if not source_file:
        return None
    try:
        with tokenize.open(source_file) as handle:
            source = handle.read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    node = _find_definition(tree, lineno, qualname)
    if node is None:
        return None
    lines = source.split("\n")
    parts = [_definition_text(lines, helper) for helper in _helpers(tree, node)]
    return "\n\n\n".join([*parts, _definition_text(lines, node)])


def _find_definition(tree: ast.Module, lineno: int | None, qualname: str) -> ast.AST | None:
    name = qualname.rsplit(".", 1)[-1]
    at_line = [n for n in ast.walk(tree) if isinstance(n, _DEFS) and lineno in (n.lineno, _first_line(n))]
    if at_line:
        return next((n for n in at_line if n.name == name), at_line[0])
    body: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in (p for p in qualname.split(".") if p != "<locals>"):
        matches = [n for n in body if isinstance(n, _DEFS) and n.name == part]
        if not matches:
            return None
        found = matches[-1]
        body = found.body
    return found


def _first_line(node: ast.AST) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _helpers(tree: ast.Module, node: ast.AST) -> list[ast.AST]:
    """Module-level functions `node` calls by bare name, and those they call, in file order."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    chosen: dict[str, ast.AST] = {}
    frontier = [node]
    for _ in range(HELPER_DEPTH):
        called = []
        for caller in frontier:
            for call in ast.walk(caller):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                    helper = functions.get(call.func.id)
                    if helper is not None and helper is not node and call.func.id not in chosen:
                        chosen[call.func.id] = helper
                        called.append(helper)
        frontier = called
    return sorted(chosen.values(), key=lambda n: n.lineno)


def _docstring_nodes(node: ast.AST) -> list[tuple[ast.Expr, bool]]:
    """Each docstring inside `node` (its own and nested defs'), and whether it is its body's only
    statement (then it must leave a `...` behind)."""
    found = []
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if isinstance(inner, _DEFS) and body and _is_docstring(body[0]):
            found.append((body[0], len(body) == 1))
    return found


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _char_col(line: str, byte_col: int) -> int:
    """ast's columns count UTF-8 bytes; string slicing counts characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _definition_text(lines: list[str], node: ast.AST) -> str:
    """`node`'s source (decorators included), dedented, with its docstrings cut out of the text,
    so comments and layout survive; ast.unparse only if the cut text would not parse."""
    first, last = _first_line(node), node.end_lineno
    text = list(lines[first - 1 : last])
    spans = sorted(_docstring_nodes(node), key=lambda d: (d[0].lineno, d[0].col_offset), reverse=True)
    for doc, alone in spans:
        start, end = doc.lineno - first, doc.end_lineno - first
        head = text[start][: _char_col(text[start], doc.col_offset)]
        tail = text[end][_char_col(text[end], doc.end_col_offset) :]
        if alone:
            text[start : end + 1] = [head + "..." + tail]
        elif not head.strip() and not tail.strip():
            blank_after = end + 1 < len(text) and not text[end + 1].strip()
            del text[start : end + 1 + blank_after]
        else:
            text[start : end + 1] = [head + "pass" + tail]
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    code = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in text).strip("\n")
    try:
        ast.parse(code)
    except SyntaxError:
        return _unparsed(node)
    return code


def _unparsed(node: ast.AST) -> str:
    node = copy.deepcopy(node)
    for doc, alone in _docstring_nodes(node):
        doc.value = ast.Constant(...) if alone else ast.Constant(None)
    return ast.unparse(node)


# ------------------------------------------------------------------------------------------ build
@dataclass
class _Draft:
    row: dict[str, Any]
    spec: dict[str, Any]
    mechanism: dict[str, str]
    examples: DocExamples
    units: list[int]  # indices into the run's units: the doctest (if any), the snippets, the mined
    mined: list[Mined] = field(default_factory=list)


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


EXAMPLE_OUTCOMES = (
    "examples_kept",
    "example_failed",
    "example_timeout",
    "example_needs_network",  # it reached for a host name or a remote address: offline here
    "example_needs_server",  # it connected to a local service (a database server, an app) not running
)
_NEEDS_SERVER = re.compile(r"ConnectionRefusedError|Connection refused|could not connect to server")
_NEEDS_NETWORK = re.compile(
    r"gaierror|Name or service not known|Temporary failure in name resolution|Network is unreachable"
    r"|No address associated|nodename nor servname|ConnectTimeout|timed out.*connect|URLError"
)


def example_outcome(outcome: Outcome) -> str:
    """The manifest's name for how an example ended; a failure that needed a network or a server says so."""
    if outcome.status == OK:
        return "examples_kept"
    if outcome.status == TIMEOUT:
        return "example_timeout"
    if _NEEDS_SERVER.search(outcome.why):
        return "example_needs_server"
    return "example_needs_network" if _NEEDS_NETWORK.search(outcome.why) else "example_failed"


def build_bundles(
    out: Path,
    timeout_s: float = 10.0,
    progress: Callable[[int, int], None] | None = None,
    mined: dict[str, list[Mined]] | None = None,
    namespace: dict[str, str] | None = None,
    origins: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write `out/bundles.jsonl` and `out/bundles.json` (the manifest, returned) from `out/apis.jsonl`
    and `out/discovery.json`. `progress(done, total)` follows the example runs; `mined`: qualname ->
    examples from the library's tests and docs, `namespace`: name -> import its doctests take for
    granted (`mining.py`), `origins`: where the mined files came from (the sdist, the repository)."""
    out = Path(out)
    for needed in ("apis.jsonl", "discovery.json"):
        if not (out / needed).is_file():
            raise UserError(f"{out / needed} is missing; run the novel-API discovery into {out} first")
    discovery = json.loads((out / "discovery.json").read_text())
    python = (discovery.get("python") or {}).get("new")
    if not python or not Path(python).exists():
        raise UserError(f"{out}/discovery.json names no usable python.new ({python!r}); rerun discovery")
    rows = [row for row in read_records(out / "apis.jsonl", API_FIELDS) if row.get("kept")]
    dropped: Counter[str] = Counter({reason: 0 for reason in DROP_REASONS})
    drafts, units = _drafts(rows, dropped, mined or {}, namespace or {})
    outcomes = run_examples(python, units, timeout_s, progress)
    counts = Counter({key: 0 for key in EXAMPLE_OUTCOMES})
    counts.update(example_outcome(o) for o in outcomes)
    failures = [
        {"qualname": units[i].qualname, "kind": units[i].kind, "status": o.status, "why": o.why}
        for i, o in enumerate(outcomes)
        if o.status != OK
    ]
    bundles = []
    sources: Counter[str] = Counter()
    for draft in drafts:
        examples = _verified_examples(draft, [outcomes[i].status == OK for i in draft.units])
        if not examples:
            dropped["no_valid_example"] += 1
            continue
        sources.update(e["source"] for e in examples)
        bundles.append(_bundle(draft, examples))
    _write_atomic(out / "bundles.jsonl", "".join(json.dumps(b) + "\n" for b in bundles))
    manifest = {
        "input": len(rows),
        "kept": len(bundles),
        "dropped": dict(dropped),
        "examples": dict(counts),
        # where the kept examples came from: docstring doctests and code blocks, tests, doc files
        "example_sources": {
            k: sources.get(k, 0) for k in ("doctest", "docstring", "tests", "docs", "examples")
        },
        "mined_examples": sum(len(v) for v in (mined or {}).values()),
        "doctest_namespace": namespace or {},
        "example_failures": failures[:MAX_FAILURES_LISTED],
        "timeout_s": timeout_s,
        "python": python,
        "library": rows[0]["library"] if rows else discovery.get("library"),
        "version": rows[0]["new_version"] if rows else None,
        **(origins or {}),
    }
    _write_atomic(out / "bundles.json", json.dumps(manifest, indent=2) + "\n")
    return manifest


def _drafts(
    rows: list[dict[str, Any]],
    dropped: Counter[str],
    mined: dict[str, list[Mined]],
    namespace: dict[str, str],
) -> tuple[list[_Draft], list[Unit]]:
    """S and M of each row (or its drop reason) and the example runs of those that remain; each
    example with the imports it takes from the project's doctest namespace written in."""
    drafts: list[_Draft] = []
    units: list[Unit] = []
    for row in rows:
        found = with_namespace(find_examples(row.get("doc")), namespace)
        doc = parse_doc(found.text)
        spec = make_spec(row, doc)
        if spec is None:
            dropped["no_signature"] += 1
            continue
        code = read_definition(row.get("source_file"), row.get("lineno"), row["qualname"])
        if code is None:
            dropped["source_unreadable"] += 1
            continue
        module = row.get("module") or str(row["canonical"]).rsplit(".", 1)[0]
        mine = []
        if found.doctest:
            mine.append(len(units))
            units.append(Unit("doctest", module, row["qualname"], found.doctest))
        for snippet in found.snippets:
            mine.append(len(units))
            units.append(Unit("snippet", module, row["qualname"], snippet))
        extra = [
            replace(m, code=needed_imports(m.code, namespace) + m.code)
            for m in mined.get(row["qualname"], [])
        ]
        for example in extra:
            mine.append(len(units))
            units.append(Unit("snippet", module, row["qualname"], example.code))
        mechanism = {"prose": prose(doc, found.text), "code": code}
        drafts.append(_Draft(row, spec, mechanism, found, mine, extra))
    return drafts, units


def _verified_examples(draft: _Draft, passed: list[bool]) -> list[dict[str, str]]:
    examples: list[dict[str, str]] = []
    if draft.examples.doctest:
        doctest_ok, passed = passed[0], passed[1:]
        if doctest_ok:
            examples += [{"code": c, "output": o, "source": "doctest"} for c, o in draft.examples.chunks]
    snippets = len(draft.examples.snippets)
    for snippet, ok in zip(draft.examples.snippets, passed[:snippets], strict=True):
        if ok:
            examples.append({"code": snippet, "output": "", "source": "docstring"})
    origins: set[str] = set()
    per_source: Counter[str] = Counter()
    for example, ok in zip(draft.mined, passed[snippets:], strict=True):
        # the first `PER_API` of each source that run, and of a test's variants the first
        if ok and example.origin not in origins and per_source[example.source] < PER_API:
            origins.add(example.origin)
            per_source[example.source] += 1
            examples.append(
                {"code": example.code, "output": "", "source": example.source, "origin": example.origin}
            )
    return examples


def _bundle(draft: _Draft, examples: list[dict[str, str]]) -> dict[str, Any]:
    row = draft.row
    return {
        "qualname": row["qualname"],
        "kind": row.get("kind"),
        "library": row["library"],
        "version": row["new_version"],
        "license": row.get("license"),
        "paths": list(row.get("paths") or []),
        "module": row.get("module"),
        "S": draft.spec,
        "E": examples,
        "M": draft.mechanism,
    }
