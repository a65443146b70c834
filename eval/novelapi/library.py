"""What the failure taxonomy needs to know of the library under test: where its files are (an
exception raised there was raised inside the API's body) and every name it defines anywhere (a
missing name that exists somewhere in the library is a wrong import path; one that exists
nowhere was hallucinated)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LibraryFacts:
    folders: tuple[str, ...] = ()  # the package's folders (or its one module file)
    names: frozenset[str] = frozenset()  # modules, functions, classes, attributes, re-exports


@functools.cache
def library_facts(library: str, python: str | None = None) -> LibraryFacts:
    """The facts of ``library`` as ``python`` (default: this interpreter) imports it; empty facts
    where it cannot be found (the classifier then falls back to the target's own names)."""
    folders = _locate(library, python)
    return LibraryFacts(tuple(folders), names_in(folders))


def names_in(folders: list[str] | tuple[str, ...]) -> frozenset[str]:
    """Every name the Python files under ``folders`` define: module and package names, functions
    and classes at any depth, assignment targets, imported names (re-exports) and ``__all__``."""
    names: set[str] = set()
    files: list[Path] = []
    for folder in map(Path, folders):
        if folder.is_file():
            files.append(folder)
        elif folder.is_dir():
            files.extend(folder.rglob("*.py"))
    for file in files:
        names.update(part for part in file.with_suffix("").parts[-2:] if part != "__init__")
        try:
            tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update(
                    alias.asname or alias.name.split(".")[-1] for alias in node.names if alias.name != "*"
                )
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
                names.update(t.attr for t in targets if isinstance(t, ast.Attribute))
        for node in tree.body:
            exported = isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            )
            if exported and isinstance(node.value, (ast.List, ast.Tuple)):
                names.update(
                    e.value
                    for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    return frozenset(names)


def _locate(library: str, python: str | None) -> list[str]:
    if python is None or os.path.realpath(python) == os.path.realpath(sys.executable):
        try:
            spec = importlib.util.find_spec(library)
        except (ImportError, ValueError):
            return []
        if spec is None:
            return []
        return list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
    code = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.find_spec(sys.argv[1])\n"
        "print(json.dumps([] if spec is None else list(spec.submodule_search_locations or []) or [spec.origin]))\n"
    )
    try:
        out = subprocess.run([python, "-I", "-c", code, library], capture_output=True, text=True, timeout=60)
        return [p for p in json.loads(out.stdout or "[]") if p]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
