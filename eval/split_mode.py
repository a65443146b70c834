"""Which Python problems run split (tests in a trusted process, the program behind a plain-data
boundary; docs/sandbox.md) and which in process, decided per problem and never by a sample.

A problem runs split unless its own text says it cannot (``static_reason``: tests that subclass a
class of the program, load the program by path, introspect its namespace or patch it), and unless
running its reference and its ``before`` program both ways gives different per-test outcomes
(``confirm``). An outcome is the status and the test line that failed first (checking stops there
in both modes), so "identical" means: both pass, or both fail at the same assert, or both time out.
A sample that breaks the split protocol just fails: it never moves its problem to in-process mode.

The decision is cached on the sandbox object and on disk (``$EDITFORGE_CACHE/split-modes``), keyed
by the problem's texts, the protocol's source and this module's, the interpreter and the time limit,
so an evaluation decides each problem once and later evaluations on the machine reuse it.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError
from core.problems import Problem
from core.python_facts import facts
from core.sandbox import ExecutionResult, Sandbox, SandboxLimits
from core.sandbox.declared import split_modules, unverified_flags
from core.sandbox.native import cache_dir

log = logging.getLogger(__name__)
SANDBOX = Path(__file__).resolve().parents[1] / "core" / "sandbox"
BUILTIN_NAMES = frozenset(dir(builtins))

IN_PROCESS_PATTERNS = (
    (re.compile(r"main\.py|__file__|\brunpy\b|\bimportlib\b|\bsys\.modules\b|\bsubprocess\b|\bos\.system\b"),
     "the tests load the program by path"),
    (re.compile(r"\bimport\s+main\b|\bfrom\s+main\s+import\b"), "the tests import the program as a module"),
    (re.compile(r"\b(globals|locals|vars)\(\s*\)|\bdir\(\s*\)|\binspect\b"), "the tests introspect the program's namespace"),
    (re.compile(r"\bmock\b|\bmonkeypatch\b"), "the tests patch the program"),
    (re.compile(r"(?<![.\w])(eval|exec|compile|__import__)\s*\(|\b(pickle|marshal|shelve|dill|yaml|doctest|copyreg)\b"
                r"|\b(np|numpy|torch|joblib)\.load\s*\("),
     "the tests evaluate text or data the program produced (it would run where the tests run)"),
)  # fmt: skip


@dataclass(frozen=True)
class RunMode:
    split: bool
    reason: str = ""  # why the problem runs in process; empty when it runs split


def static_reason(problem: Problem) -> str:
    """Why the problem's own text rules out a split run ("" when nothing does)."""
    if problem.language != "python":
        return "not Python: its tests run as the language's command line"
    for pattern, reason in IN_PROCESS_PATTERNS:
        if pattern.search(problem.tests):
            return reason
    tests, after, before = facts(problem.tests), facts(problem.after), facts(problem.before)
    if not tests.parses:
        return "the tests do not parse"
    shadowed = sorted(tests.used & BUILTIN_NAMES & (after.names | before.names))
    if shadowed:  # split, the tests' builtins win over the program's names (docs/sandbox.md)
        return f"the tests call {shadowed[0]}, a builtin's name the program defines"
    program_classes = (after.classes | before.classes) - tests.classes
    for bases in tests.class_bases:
        if bases & program_classes:
            return f"the tests subclass the program's class {sorted(bases & program_classes)[0]}"
    return ""


def benchmark_modules(problem: Problem) -> list[str]:
    """What the trusted side of the problem's split runs imports itself (`split_modules`): the
    modules the problem's own text imports and the names its prelude, ``before`` and reference bind."""
    return split_modules((problem.prelude, problem.before, problem.after), (problem.tests, problem.helpers))


def outcome(result: ExecutionResult) -> tuple[str, str]:
    """(status, the tests' line where the run failed first, or "") of one run."""
    if result.passed:  # passed or passed_unverified: in process the latter is the same pass
        return "passed", ""
    lines = result.failed_test_lines
    return result.status, str(lines[-1]) if lines else ""


def run_modes(sandbox: Sandbox, problems: Sequence[Problem], limits: SandboxLimits) -> dict[str, RunMode]:
    """The mode of every problem (cached on ``sandbox`` and on disk, see the module docstring)."""
    known: dict[str, RunMode] = sandbox.__dict__.setdefault("_split_run_modes", {})
    salt = _salt(sandbox, limits)
    keys = {p.id: _key(p, salt) for p in problems}
    todo = [p for p in problems if keys[p.id] not in known]
    for problem in todo:
        # the problem's own text first: nothing stored (a file anyone who can write the cache left
        # there) moves a problem the static check keeps in process
        reason = static_reason(problem)
        stored = None if reason else _stored(keys[problem.id])
        if reason or stored:
            known[keys[problem.id]] = RunMode(False, reason) if reason else stored  # type: ignore[assignment]
    confirmable = [p for p in todo if keys[p.id] not in known]
    if confirmable:
        log.info(
            "deciding which of %d problems run split (their reference and before programs, both ways)",
            len(confirmable),
        )
    for problem, mode in zip(confirmable, confirm(sandbox, confirmable, limits), strict=True):
        known[keys[problem.id]] = mode
        _store(keys[problem.id], mode)
    return {p.id: known[keys[p.id]] for p in problems}


def confirm(sandbox: Sandbox, problems: Sequence[Problem], limits: SandboxLimits) -> list[RunMode]:
    """Run each problem's reference and ``before`` split and in process; split where both pairs agree.

    A problem whose pairs differ runs again once, and stays in process only if they differ again: a
    decision is kept for every later evaluation, and one run's outcome can owe something to the
    worker it ran on (a trusted process that an earlier run on it left broken, say)."""
    differs = _differences(sandbox, problems, limits)
    again = [i for i, why in enumerate(differs) if why]
    for i, why in zip(again, _differences(sandbox, [problems[i] for i in again], limits), strict=True):
        differs[i] = why
    return [RunMode(False, "outcomes differ: " + why) if why else RunMode(True) for why in differs]


def _differences(sandbox: Sandbox, problems: Sequence[Problem], limits: SandboxLimits) -> list[str]:
    """Per problem, how its programs' outcomes differ between split and in process ("": they agree)."""
    jobs, splits, helpers = [], [], []
    for problem in problems:
        for code in (problem.after, problem.before):
            for split in (True, False):
                jobs.append((problem.program(code), problem.tests))
                splits.append(split)
                helpers.append(problem.helpers)
    if not jobs:
        return []
    unverified = [flag for flag in _unverified(sandbox, problems) for _ in range(4)]
    modules = [benchmark_modules(p) for p in problems for _ in range(4)]
    results = sandbox.run_many(
        jobs, limits=limits, split=splits, helpers=helpers, unverified=unverified, modules=modules
    )
    differs = []
    for i, _ in enumerate(problems):
        ref_split, ref_local, before_split, before_local = results[4 * i : 4 * i + 4]
        differs.append(
            "; ".join(
                f"{name}: {outcome(a)} split, {outcome(b)} in process"
                for name, a, b in (
                    ("reference", ref_split, ref_local),
                    ("before", before_split, before_local),
                )
                if outcome(a) != outcome(b)
            )
        )
    return differs


def _unverified(sandbox: Sandbox, problems: Sequence[Problem]) -> list[bool]:
    return unverified_flags(sandbox, [(p.prelude, p.before, p.after, p.tests) for p in problems])


def _salt(sandbox: Sandbox, limits: SandboxLimits) -> str:
    """What else a decision depends on: the protocol's code and this module's, the interpreter, the
    time limit."""
    sources = (
        "".join(
            (SANDBOX / name).read_text()
            for name in ("plain.py", "split_trusted.py", "split_candidate.py", "trusted_server.py")
        )
        + Path(__file__).read_text()
    )
    python = getattr(sandbox, "python", None) or sys.executable
    salt = f"{sources}\0{python}\0{limits.timeout_s}\0{limits.memory_mb}"
    return hashlib.sha256(salt.encode("utf-8", "surrogatepass")).hexdigest()  # not hashed again per problem


def _key(problem: Problem, salt: str) -> str:
    texts = (problem.prelude, problem.before, problem.after, problem.tests, problem.helpers, salt)
    return hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()


def _stored(key: str) -> RunMode | None:
    try:
        record = json.loads((cache_dir("split-modes") / f"{key}.json").read_text())
        return RunMode(bool(record["split"]), str(record["reason"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(key: str, mode: RunMode) -> None:
    folder = cache_dir("split-modes")
    try:
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as f:
            json.dump({"split": mode.split, "reason": mode.reason}, f)
        os.replace(f.name, folder / f"{key}.json")
    except OSError as err:  # a read-only cache: the next evaluation decides again
        log.debug("cannot store a split decision: %s", err)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m eval.split_mode canitedit [--path hub:nuprl/CanItEdit]``: how many of a
    benchmark's Python problems run split, and why each other one runs in process."""
    import argparse

    from core.benchmarks import kind_of
    from core.sandbox.config import SandboxConfig

    parser = argparse.ArgumentParser(prog="python -m eval.split_mode", description=main.__doc__)
    parser.add_argument("benchmark", choices=["canitedit", "fixtures", "humanevalfix", "editbench"])
    parser.add_argument("--path", default=None, help="the benchmark's source (default: its own)")
    parser.add_argument("--backend", default="auto", choices=["auto", "bwrap", "local"])
    args = parser.parse_args(argv)
    source = kind_of(args.benchmark)
    try:
        problems = [p for p in source.load(source.options(path=args.path)) if p.language == "python"]
    except UserError as err:
        raise SystemExit(f"error: {err}") from None
    # the sandbox's own default limits, as before: the runs below pass theirs
    with SandboxConfig(backend=args.backend, limits=SandboxLimits()).open() as sandbox:
        modes = run_modes(sandbox, problems, SandboxLimits())
    split = sum(mode.split for mode in modes.values())
    print(
        f"{split} of {len(problems)} Python problems of {args.benchmark} run split ({100 * split / max(len(problems), 1):.1f}%)"
    )
    for problem in problems:
        if not modes[problem.id].split:
            print(f"  in process: {problem.id} ({problem.name}): {modes[problem.id].reason}")


if __name__ == "__main__":
    main()
