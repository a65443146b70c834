"""What the failure taxonomy needs to know of the library under test: where its files are (an
exception raised there was raised inside the API's body) and every name it defines anywhere (a
missing name tells a sibling API from a hallucinated symbol) and its module paths (what of a
target's qualified name is its module, what its symbol).

The facts come from the interpreter that has the library. That is this process only when it is
the same environment (the same ``sys.prefix``): a virtualenv built on this process's base Python
shares its real executable but not its site-packages, so executables are never compared. A
library found nowhere, or with no names, is announced with a `LibraryFactsWarning`: the
classifier then knows only the target's own names, and says so once per library."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path


class LibraryFactsWarning(UserWarning):
    """The library's facts are empty: its failure classes rest on the target's names alone."""


@dataclass(frozen=True)
class LibraryFacts:
    folders: tuple[str, ...] = ()  # the package's folders (or its one module file)
    names: frozenset[str] = frozenset()  # modules, functions, classes, attributes, re-exports
    modules: frozenset[str] = frozenset()  # dotted module paths (``pkg``, ``pkg.sub.mod``)


@functools.cache
def library_facts(library: str, python: str | None = None) -> LibraryFacts:
    """The facts of ``library`` as ``python`` (default: this interpreter) imports it; empty facts,
    with a `LibraryFactsWarning`, where it cannot be found or defines no name."""
    folders = _locate(library, python)
    facts = LibraryFacts(tuple(folders), names_in(folders), modules_in(library, folders))
    if not facts.names:
        where = f"the interpreter {python}" if python else "this interpreter"
        found = f"found at {', '.join(folders)} but defines no name" if folders else "not found"
        warnings.warn(
            f"library {library!r} {found} by {where}: failure classes will know only the target's "
            "own names; check the task's interpreter (discovery.json) has the library installed",
            LibraryFactsWarning,
            stacklevel=2,
        )
    return facts


def modules_in(library: str, folders: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The dotted paths of the library's modules: ``library`` and, under a package folder, every
    ``.py`` file and subpackage (``pkg/sub/mod.py`` -> ``pkg.sub.mod``)."""
    modules = {library} if folders else set()
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        for file in folder.rglob("*.py"):
            parts = file.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            modules.add(".".join((library, *parts)))
    return frozenset(modules)


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


def same_environment(python: str | None) -> bool:
    """Whether ``python`` imports from this process's environment: it is this executable, or it
    lies in a virtualenv (a ``pyvenv.cfg`` beside its ``bin``) whose root is this ``sys.prefix``.
    Real paths of executables are never compared: every venv on one base Python shares them."""
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        return True
    root = venv_root(python)
    return root is not None and root == os.path.realpath(sys.prefix)


def venv_root(python: str) -> str | None:
    """The real path of the virtualenv ``python`` belongs to (the folder with its ``pyvenv.cfg``),
    or None for a base interpreter; the executable's own link is not followed (it leads out)."""
    folder = Path(os.path.abspath(python)).parent.parent
    return os.path.realpath(folder) if (folder / "pyvenv.cfg").is_file() else None


def _locate(library: str, python: str | None) -> list[str]:
    if same_environment(python):
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
