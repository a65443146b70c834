"""Which builtin and standard-library APIs a program calls, resolved through its imports.

`api_calls(source)` walks the AST once: names bound by `import m`, `import m as a`,
`from m import f as g` are resolved to qualified names (`math.sqrt`, `os.path.join`), a bare
name that no import or assignment shadows is a builtin (`builtins.len`). Method calls on
values (`s.split()`) are not resolvable without types and are left out. Only modules of the
standard library count (`sys.stdlib_module_names`).

>>> sorted({c.api for c in api_calls("import math\\nfrom re import split as sp\\n"
...                                  "def f(x):\\n    return sp(',', str(len(x))) + [math.sqrt(x)]")})
['builtins.len', 'builtins.str', 'math.sqrt', 're.split']
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass

STDLIB = frozenset(sys.stdlib_module_names)


@dataclass(frozen=True)
class APICall:
    api: str  # qualified name: builtins.len, math.sqrt, os.path.join
    node: ast.Call
    local: str  # the name as written (`len`, `math.sqrt`, `sp`)


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name for every import in `tree` (any scope; later ones win)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def assigned_names(tree: ast.AST) -> set[str]:
    """Names the program binds itself (functions, classes, assignments, parameters)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def roots_of(api: str) -> frozenset[str]:
    """The module roots whose calls count when looking for `api`: the standard library's, and
    `api`'s own (`torch` for `torch.cuda.device_count`, a fixture API outside the standard library)."""
    return STDLIB | {api.split(".")[0]}


def qualified_name(
    func: ast.expr, aliases: dict[str, str], shadowed: set[str], roots: frozenset[str] = STDLIB
) -> str | None:
    """The qualified API a call's function expression names (a module among `roots`), or None."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    if func.id in aliases:
        base = aliases[func.id]
    elif func.id in shadowed:
        return None
    elif not parts and hasattr(builtins, func.id) and not func.id.startswith("_"):
        return f"builtins.{func.id}"
    else:
        return None
    name = ".".join([base, *reversed(parts)])
    return name if name.split(".")[0] in roots and "." in name else None


def api_calls(source: str | ast.AST, roots: frozenset[str] = STDLIB) -> list[APICall]:
    """Every call of a builtin or standard-library API in `source` (a SyntaxError propagates);
    `roots` widens the modules that count (`roots_of`)."""
    tree = ast.parse(source) if isinstance(source, str) else source
    aliases = import_aliases(tree)
    shadowed = assigned_names(tree) - set(aliases)
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            api = qualified_name(node.func, aliases, shadowed, roots)
            if api is not None:
                calls.append(APICall(api, node, ast.unparse(node.func)))
    return calls


def references(source: str | ast.AST, api: str) -> list[ast.expr]:
    """Every expression that names `api` (called or not: `key=len` counts)."""
    tree = ast.parse(source) if isinstance(source, str) else source
    aliases = import_aliases(tree)
    shadowed = assigned_names(tree) - set(aliases)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Name, ast.Attribute))
            and isinstance(getattr(node, "ctx", None), ast.Load)
            and qualified_name(node, aliases, shadowed, roots_of(api)) == api
        ):
            found.append(node)
    return found
