"""Which problems run in the declared unverified mode: those whose own trusted code (reference
solution, prelude, tests, the library under test) imports a module with raw memory access.

Strict mode refuses such imports (code_guard.RAW_MEMORY_MODULES), because a program that can read
memory can read the pass nonce. A problem that genuinely needs numpy (CanItEdit has several) is
declared unverified by its benchmark's own text, never by the candidate's: the candidate's
imports are never scanned, so importing numpy cannot buy a program the weaker mode. Whether a
third-party package pulls in such a module (scikit-learn loads numpy, z3 loads ctypes) is
found by importing it once in the sandbox itself, in strict mode.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence

from core.python_facts import facts
from core.sandbox.code_guard import RAW_MEMORY_MODULES
from core.sandbox.sandbox import Sandbox

# The refusal the harness raises for such an import (see code_guard.install_guard), found anywhere in
# the error or its traceback: a library may catch it and raise its own (pandas: "Unable to import
# required dependency numpy", with the refusal as its cause).
_REFUSAL = re.compile(r"importing \S+ is not allowed in strict mode")


def imported_roots(*texts: str) -> set[str]:
    """Top-level names of the modules the texts import (absolute imports; a text that does not
    parse is scanned line by line)."""
    roots: set[str] = set()
    for text in texts:
        roots |= facts(text).imported
    return roots


def raw_memory_roots(sandbox: Sandbox, roots: Iterable[str]) -> frozenset[str]:
    """Those of ``roots`` whose import loads a module with raw memory access in ``sandbox``'s
    interpreter; each third-party root is imported there once per sandbox (cached on it)."""
    known: dict[str, bool] = sandbox.__dict__.setdefault("_raw_memory_roots", {})
    unknown = []
    for root in sorted(set(roots)):
        if root in known:
            continue
        if root in RAW_MEMORY_MODULES:
            known[root] = True
        elif root in sys.stdlib_module_names or not root.isidentifier():
            known[root] = False
        else:
            unknown.append(root)
    if unknown:
        results = sandbox.run_many([(f"import {root}\n", "") for root in unknown])
        for root, result in zip(unknown, results, strict=True):
            known[root] = not result.passed and bool(_REFUSAL.search(result.detail + "\n" + result.stderr))
    return frozenset(root for root in roots if known[root])


def unverified_flags(sandbox: Sandbox, trusted_texts: Sequence[Iterable[str]]) -> list[bool]:
    """One flag per job: whether its trusted texts import a module with raw memory access."""
    per_job = [imported_roots(*texts) for texts in trusted_texts]
    raw = raw_memory_roots(sandbox, set().union(*per_job)) if per_job else frozenset()
    return [bool(roots & raw) for roots in per_job]


def split_modules(bound: Sequence[str], imported: Sequence[str]) -> list[str]:
    """What a split run's trusted side imports itself (``Sandbox.run``'s ``modules``): the top-level
    modules every text of ``bound`` and ``imported`` imports, and ``name=module.path`` for each name
    the ``bound`` texts (the problem's own program text) bind by a top-level import (``np=numpy``,
    ``sqrt=math.sqrt``): the trusted side binds those names itself, never from the program, so the
    tests' ``np.allclose`` is numpy's whatever the program binds to ``np``."""
    bindings: dict[str, str] = {}
    for text in bound:
        bindings.update(facts(text).bindings)
    roots = imported_roots(*bound, *imported)
    return sorted(roots) + sorted(f"{name}={path}" for name, path in bindings.items())
