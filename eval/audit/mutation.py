"""Mutation testing of a benchmark's reference edit: would its tests notice damage, and where?

The published audit asked whether a benchmark's tests would notice a regression OUTSIDE the
lines an edit changed ("preservation") and named mutation testing as the ideal measure. Here
the reference program (`Problem.after`) gets first-order, AST-level mutants, each tagged with
its region: "inside" when the mutated node's first line is one the edit added or rewrote
(`diff_region(before, after)`), else "outside". Each mutant replaces `after` in
`Problem.program` and runs with the problem's tests in the sandbox; it is *killed* when the run
does not pass. A low outside kill rate means the tests would let a model break code it was
told to keep.

The operators are `core.mutation`'s (delete, negate, constant, operator); a block spans both
regions, so its inner statements are mutated one by one instead.

Mutant source is `ast.unparse` of the mutated module (comments and layout are lost; the
whole program is re-run, and a control run of the unmutated, unparsed reference must pass
first, so a kill is never the unparse's doing).

Outcomes: ``killed`` covers every non-pass: a failed assert or exception, a timeout, a memory
or output-limit stop, a crash. The timeout is ``max(min_timeout_s, timeout_factor x the
reference's runtime)``, so a mutant that loops forever is killed fast. A sandbox ``error``
says nothing about the program: it is counted under ``errors``, apart from ``run``. A
surviving mutant whose statement the reference's tests never execute (coverage.py, measured
in the sandbox) is ``uncovered``: no test could kill it, so it is counted apart and left out
of the kill rate.
Coverage is by line: a survivor in the untaken half of a ternary or a short-circuited operand
on an executed line is a plain survivor.

Equivalent mutants: a mutant whose module is `ast.dump`-equal to the reference or to an
earlier mutant (e.g. ``1e20 + 1 == 1e20``) is dropped as ``equivalent`` and counted; together
with ``uncovered`` these are the equivalents we flag. Semantic equivalence (a mutant that
behaves like the reference on every input) is undecidable and not claimed: some survivors
may be equivalent, so the kill rate is a lower bound on what the tests could notice.

Mutation is Python-only here: other languages' problems get ``skipped = "language"``.
"""

from __future__ import annotations

import ast
import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from core.mutation import Site, applied, mutation_sites, preorder, shown_change, spread
from core.problems import Problem
from core.sandbox import ExecutionResult, Sandbox, SandboxLimits
from eval.audit.linecoverage import diff_region, prelude_lines, source_lines
from eval.excess_code import CoverageError, CoverageReport, coverage_of
from eval.execute import declared_unverified

REGIONS = ("inside", "outside")


@dataclass(frozen=True)
class Mutant:
    """One first-order mutant of the reference; `line` is 1-based in `Problem.after`."""

    line: int
    operator: str
    region: str  # "inside" | "outside"
    source: str  # the whole mutated `after`, ast.unparse'd
    description: str
    statement_line: int | None = None  # first line of the enclosing statement (coverage's line); None: `line`


@dataclass(frozen=True)
class MutantSample:
    """The sampled mutants plus, per region, how many were generated and dropped as equivalent."""

    mutants: list[Mutant]
    generated: dict[str, int]
    equivalent: dict[str, int]


def sample_mutants(reference: str, diff_lines: set[int], cap: int = 20, seed: int = 0) -> MutantSample:
    """First-order mutants of `reference`, at most `cap` per region, deterministic for `seed`.

    Mutants equal (`ast.dump`) to the reference or to another mutant are dropped before
    sampling and counted as equivalent, so the cap is spent on distinct programs. Raises
    SyntaxError when `reference` does not parse.
    """
    if cap < 0:
        raise ValueError(f"cap must be >= 0, got {cap}")
    tree = ast.parse(reference)
    nodes = preorder(tree)
    seen = {ast.dump(tree)}
    distinct: dict[str, list[Site]] = {r: [] for r in REGIONS}
    generated = dict.fromkeys(REGIONS, 0)
    equivalent = dict.fromkeys(REGIONS, 0)
    for site in mutation_sites(tree, nodes):
        region = "inside" if site.line in diff_lines else "outside"
        generated[region] += 1
        with applied(nodes, site):
            dump = ast.dump(tree)
        if dump in seen:
            equivalent[region] += 1
            continue
        seen.add(dump)
        distinct[region].append(site)
    mutants: list[Mutant] = []
    for region in REGIONS:
        for site in spread(distinct[region], cap, random.Random(f"{seed}:{region}")):
            before = shown_change(nodes, site)
            with applied(nodes, site):
                source = ast.unparse(tree) + "\n"
                after = shown_change(nodes, site) if site.operator != "delete" else "pass"
            description = f"{site.operator}: `{before}` -> `{after}`"
            mutants.append(Mutant(site.line, site.operator, region, source, description, site.statement_line))
    mutants.sort(key=lambda m: (REGIONS.index(m.region), m.line, m.operator, m.description))
    return MutantSample(mutants, generated, equivalent)


def mutants(reference: str, diff_lines: set[int], cap: int = 20, seed: int = 0) -> list[Mutant]:
    """The sampled mutants of `sample_mutants` (without its counts)."""
    return sample_mutants(reference, diff_lines, cap, seed).mutants


def _counts() -> dict[str, Any]:
    keys = ("generated", "equivalent", "run", "killed", "survived", "uncovered", "errors")
    return {**dict.fromkeys(keys, 0), "kill_rate": None}


@dataclass
class MutationReport:
    """One problem's mutation audit; `as_dict()` is JSON-ready.

    `skipped` says why nothing (or nothing scored) ran: "language" (not Python), "syntax" (the
    reference does not parse), "reference_fails" (the reference with its tests does not pass:
    no mutant can be judged against it), "unparse_fails" (the unparsed, unmutated reference
    fails, so a kill could be the unparse's doing). Per region: generated (all candidates),
    equivalent (dropped as syntactic equivalents), run (mutants with a verdict: killed +
    survived + uncovered), errors (sandbox errors: no verdict, not in run) and
    kill_rate = killed / (run - uncovered), None when that is 0.
    """

    problem_id: str
    skipped: str | None = None
    detail: str = ""
    regions: dict[str, dict[str, Any]] = field(default_factory=lambda: {r: _counts() for r in REGIONS})
    reference_runtime_s: float | None = None
    timeout_s: float | None = None
    coverage_measured: bool = False
    mutants: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with each region's counts at the top level (`d["outside"]["kill_rate"]`)."""
        d = dataclasses.asdict(self)
        regions = d.pop("regions")
        return {"problem_id": d.pop("problem_id"), **regions, **d}


def prelude_offset(problem: Problem) -> int:
    """Lines `Problem.program` puts before `after` (the prelude and its joining newline), so a
    reference line n is coverage's line n + offset; -1 when the program's lines do not line up
    with `after` that way (coverage is then not used)."""
    program = source_lines(problem.program(problem.after))
    offset = prelude_lines(problem)
    after = source_lines(problem.after)
    return offset if program[offset:] == after[: len(program) - offset] else -1


def _outcome(result: ExecutionResult, mutant: Mutant, missing: set[int] | None, offset: int) -> str:
    if result.status == "error":
        return "error"
    if not result.passed:
        return "killed"  # failure, timeout, memory/output limit and crash alike
    line = mutant.statement_line or mutant.line
    return "uncovered" if missing is not None and line + offset in missing else "survived"


def run_mutants(
    problem: Problem,
    sandbox: Sandbox,
    cap: int = 20,
    seed: int = 0,
    timeout_factor: float = 10.0,
    min_timeout_s: float = 1.0,
    limits: SandboxLimits | None = None,
) -> MutationReport:
    """Run `problem`'s reference mutants against its tests; see the module docstring.

    `limits` (default: the sandbox's own) apply to the reference, control and coverage runs;
    mutants get the same limits with the scaled timeout.
    """
    report = MutationReport(problem.id)
    if problem.language != "python":
        report.skipped, report.detail = "language", f"mutation is Python-only; got {problem.language!r}"
        return report
    try:
        sample = sample_mutants(problem.after, diff_region(problem.before, problem.after), cap, seed)
    except SyntaxError as err:
        report.skipped, report.detail = "syntax", f"the reference does not parse: {err}"
        return report
    for region in REGIONS:
        report.regions[region]["generated"] = sample.generated[region]
        report.regions[region]["equivalent"] = sample.equivalent[region]
    base = limits or getattr(sandbox, "limits", None) or SandboxLimits()
    reference = problem.program(problem.after)
    control = problem.program(ast.unparse(ast.parse(problem.after)) + "\n")
    unverified = declared_unverified(sandbox, [problem])[0]
    ref_result, control_result = sandbox.run_many(
        [(reference, problem.tests), (control, problem.tests)], limits=base, unverified=unverified
    )
    report.reference_runtime_s = ref_result.duration_s
    if not ref_result.passed:
        report.skipped, report.detail = "reference_fails", f"{ref_result.status}: {ref_result.detail}"
        return report
    if not control_result.passed:
        report.skipped, report.detail = "unparse_fails", f"{control_result.status}: {control_result.detail}"
        return report
    offset = prelude_offset(problem)
    missing: set[int] | None = None
    if offset >= 0:
        try:
            coverage: CoverageReport = coverage_of(reference, problem.tests, sandbox, base, unverified)
            missing = set(coverage.missing)
        except CoverageError:
            missing = None
    report.coverage_measured = missing is not None
    report.timeout_s = max(min_timeout_s, timeout_factor * ref_result.duration_s)
    mutant_limits = dataclasses.replace(base, timeout_s=report.timeout_s)
    jobs = [(problem.program(m.source), problem.tests) for m in sample.mutants]
    results = sandbox.run_many(jobs, limits=mutant_limits, unverified=unverified) if jobs else []
    for mutant, result in zip(sample.mutants, results, strict=True):
        outcome = _outcome(result, mutant, missing, offset)
        counts = report.regions[mutant.region]
        counts["errors" if outcome == "error" else outcome] += 1
        if outcome != "error":
            counts["run"] += 1
        report.mutants.append(
            {
                "line": mutant.line,
                "operator": mutant.operator,
                "region": mutant.region,
                "outcome": outcome,
                "status": result.status,
                "description": mutant.description,
            }
        )
    for counts in report.regions.values():
        scored = counts["run"] - counts["uncovered"]
        counts["kill_rate"] = counts["killed"] / scored if scored else None
    return report
