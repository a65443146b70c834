"""The source stage of pipeline=fix-tasks: code trees -> units -> candidate bugs -> rows the tests catch.

Every unit (a function or method some test names) is first run as it is, with its own tests, split
(the tests in a trusted process, the module behind the plain-data boundary) and measured for
coverage; a unit whose original does not pass is dropped: `not_split` when it passes in one process
(its tests reach into the module, so an RL reward on it would be decided in the candidate's
process), else `original_fails`. Its candidate bugs sit on the statements
those tests execute, and each runs split with the same tests under a time limit scaled from the
original's run. A candidate is a row when the tests fail on it (status `failed`: an assert or an
exception); it is dropped as `survived` (the tests pass), `mutant_timeout`, `mutant_crash`
(memory, output or signal) or `sandbox_error`. So `input` is the candidates run and
`input = kept + sum(dropped)`; the units' own accounting (found = used + each reason) is in the
stage's `extra.units`, the modules' in `extra.modules`.

Units are near-deduplicated before anything runs (vendored copies of one function make one unit).
The work is done in chunks of units recorded under the stage's work folder, so a killed build
started again runs only the units it had not finished.
"""

from __future__ import annotations

import ast
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import xxhash
from datasets import Dataset
from tqdm import tqdm

from core.batches import run_missing
from core.benchmarks import load_source, options_from
from core.errors import UserError
from core.sandbox import ExecutionResult, Sandbox
from core.sandbox.declared import split_modules, unverified_flags
from core.schema import edit_features
from data_pipeline.config import BuildConfig
from data_pipeline.fix_tasks.bugs import Bug, unit_bugs
from data_pipeline.fix_tasks.trees import code_trees
from data_pipeline.fix_tasks.units import Discovery, Subject, Unit, discover, single_program
from data_pipeline.stages import StageResult, write_rows

log = logging.getLogger(__name__)
RECORDS = "units.jsonl"
CAUGHT = "failed"  # the one status that means the tests caught the bug
DROPS = {
    "passed": "survived",
    "passed_unverified": "survived",
    "timeout": "mutant_timeout",
    "error": "sandbox_error",
}


@dataclass(frozen=True)
class Job:
    subject: Subject
    unit: Unit

    @property
    def key(self) -> str:
        return xxhash.xxh3_64_hexdigest(
            f"{self.subject.id}\0{self.unit.name}\0{self.subject.source}".encode()
        )


def fix_tasks_stage(cfg: BuildConfig, _: Any, executor: Any, work: Path) -> tuple[Dataset, StageResult]:
    started = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    found = discover_sources(cfg, work)
    jobs = [Job(s, u) for s in found.subjects for u in s.units]
    units: Counter[str] = Counter(found.units)
    jobs = _distinct_units(jobs, cfg, units)
    if not jobs:
        raise UserError(
            f"{_describe(cfg)}: no unit with tests to inject bugs into "
            f"(modules: {dict(found.modules)}; units: {dict(units)}); see docs/fix_tasks.md for what is read"
        )
    records_path = work / RECORDS
    done = _records(records_path)
    sandbox = cfg.sandbox.open(measured_split=True)
    try:
        with tqdm(total=len(jobs), desc="Fix tasks (units)", unit="unit", disable=None) as bar:
            bar.update(sum(1 for j in jobs if j.key in done))

            def keep(part: list[tuple[str, Job]], results: list[dict[str, Any]]) -> None:
                with records_path.open("a") as fh:
                    for (key, _), record in zip(part, results, strict=True):
                        fh.write(json.dumps({"key": key, **record}) + "\n")
                        done[key] = record

            run_missing(
                [(j.key, j) for j in jobs],
                lambda part: judge_units(sandbox, [j for _, j in part], cfg),
                keep,
                done,
                label="fix tasks",
                progress=bar.update,
                chunk=16,
            )
    finally:
        sandbox.close()
    rows, dropped, left_out = [], Counter(), Counter()
    candidates = 0
    for job in jobs:
        record = done[job.key]
        units[record["unit"]] += 1
        candidates += len(record["rows"]) + sum(record["dropped"].values())
        dropped.update(record["dropped"])
        left_out.update(record.get("left_out", {}))
        rows += record["rows"]
    ds = write_rows(iter(rows), edit_features(), work / "rows.arrow")
    seconds = time.perf_counter() - started
    extra = {
        "modules": dict(sorted(found.modules.items())),
        "units": dict(sorted(units.items())),
        "units_judged": len(jobs),
        # sites never run: on lines the tests skip, equal to another bug, or not writable in place
        "bugs_left_out": dict(sorted(left_out.items())),
        "yield_per_unit": round(len(rows) / len(jobs), 3),
        "rows_per_second": round(len(rows) / seconds, 3) if seconds else None,
    }
    log.info(
        "fix tasks: %d rows from %d units (%.2f rows per unit) in %.1f s: %.2f rows/s",
        len(rows),
        len(jobs),
        extra["yield_per_unit"],
        seconds,
        extra["rows_per_second"] or 0.0,
    )
    return ds, StageResult(
        "source", input=candidates, kept=len(rows), dropped=dict(sorted(dropped.items())), extra=extra
    )


def discover_sources(cfg: BuildConfig, work: Path) -> Discovery:
    """Every subject of the configured source, the counts of what was skipped merged."""
    found = Discovery()
    parts: list[Discovery] = []
    if cfg.source.kind == "benchmark":
        for options in cfg.source.benchmarks:
            options = options_from(options)
            for problem in load_source(options).problems:
                if problem.language != "python" or problem.prelude or problem.payload is not None:
                    part = Discovery()
                    part.modules["found"] += 1
                    part.modules["not_one_python_program"] += 1
                    parts.append(part)
                    continue
                parts.append(single_program(f"{options.name}:{problem.id}", problem.after, problem.tests))
    else:
        for label, root in code_trees(cfg.source, work):
            parts.append(discover(root, label, cfg.pipeline.fix.max_module_lines))
    for part in parts:
        found.subjects += part.subjects
        found.modules.update(part.modules)
        found.units.update(part.units)
    return found


def judge_units(sandbox: Sandbox, jobs: list[Job], cfg: BuildConfig) -> list[dict[str, Any]]:
    """One record per unit: its rows, and its candidates dropped by reason (see the module docstring)."""
    fix = cfg.pipeline.fix
    limits = cfg.sandbox.limits
    modules = [split_modules((j.subject.source,), (j.unit.tests,)) for j in jobs]
    unverified = unverified_flags(sandbox, [(j.subject.source, j.unit.tests) for j in jobs])
    controls = sandbox.run_many(
        [(j.subject.source, j.unit.tests) for j in jobs],
        limits=limits,
        split=True,
        coverage=True,
        modules=modules,
        unverified=unverified,
    )
    failing = [i for i, control in enumerate(controls) if not control.passed]
    in_process = sandbox.run_many(  # which failures are the boundary's: the tests reach into the module
        [(jobs[i].subject.source, jobs[i].unit.tests) for i in failing],
        limits=limits,
        unverified=[unverified[i] for i in failing],
    )
    not_split = {i for i, result in zip(failing, in_process, strict=True) if result.passed}
    records: list[dict[str, Any]] = []
    planned: list[tuple[int, Bug, float]] = []
    for i, (job, control) in enumerate(zip(jobs, controls, strict=True)):
        record: dict[str, Any] = {"unit": "judged", "rows": [], "dropped": {}}
        records.append(record)
        if not control.passed:
            record["unit"] = "not_split" if i in not_split else "original_fails"
            continue
        covered = _covered(control, len(job.subject.source.splitlines()))
        body = {n for n in covered if job.unit.body_first <= n <= job.unit.last}
        if not body:
            record["unit"] = "not_exercised"
            continue
        bugs, left_out = unit_bugs(
            job.subject.source,
            job.unit.body_first,
            job.unit.last,
            covered,
            fix.operators,
            fix.mutants_per_unit,
            f"{fix.seed}:{job.key}",
        )
        record["left_out"] = dict(left_out)
        if not bugs:
            record["unit"] = "no_bug_candidate"
            continue
        timeout = min(limits.timeout_s, max(fix.min_timeout_s, fix.timeout_factor * control.duration_s))
        planned += [(i, bug, timeout) for bug in bugs]
    runs = _run_bugs(sandbox, jobs, planned, cfg, modules, unverified)
    for (i, bug, _), result in zip(planned, runs, strict=True):
        record = records[i]
        if result.status == CAUGHT:
            record["rows"].append(fix_row(jobs[i], bug, result))
        else:
            reason = DROPS.get(result.status, "mutant_crash")
            record["dropped"][reason] = record["dropped"].get(reason, 0) + 1
    for record in records:
        if record["unit"] == "judged":
            record["unit"] = "caught" if record["rows"] else "no_bug_caught"
    return records


def _run_bugs(
    sandbox: Sandbox,
    jobs: list[Job],
    planned: list[tuple[int, Bug, float]],
    cfg: BuildConfig,
    modules: list[list[str]],
    unverified: list[bool],
) -> list[ExecutionResult]:
    """Every planned bug with its unit's tests, split, in batches of one time limit."""
    by_timeout: dict[float, list[int]] = {}
    for n, (_, _, timeout) in enumerate(planned):
        by_timeout.setdefault(timeout, []).append(n)
    results: dict[int, ExecutionResult] = {}
    for timeout, indexes in by_timeout.items():
        limits = replace(cfg.sandbox.limits, timeout_s=timeout)
        batch = [(planned[n][1].source, jobs[planned[n][0]].unit.tests) for n in indexes]
        ran = sandbox.run_many(
            batch,
            limits=limits,
            split=True,
            modules=[modules[planned[n][0]] for n in indexes],
            unverified=[unverified[planned[n][0]] for n in indexes],
        )
        results.update(zip(indexes, ran, strict=True))
    return [results[n] for n in range(len(planned))]


def _covered(result: ExecutionResult, program_lines: int) -> set[int]:
    """The program's executed statement lines, as the run measured them (nothing if it sent none)."""
    measured = result.coverage or {}
    if "error" in measured or not {"statements", "missing"} <= set(measured):
        return set()
    missing = set(measured["missing"])
    return {
        n
        for n in measured["statements"]
        if isinstance(n, int) and 1 <= n <= program_lines and n not in missing
    }


def fix_row(job: Job, bug: Bug, result: ExecutionResult) -> dict[str, Any]:
    """The edit-contract row: `before` the module with the bug, `after` the original; `meta` holds
    the tests, the lazy instruction and the mutation."""
    unit = job.unit.name
    symptom = _symptom(result, job.unit.tests)
    meta = {
        "kind": "fix_task",
        "module": job.subject.path,
        "unit": unit,
        "operator": bug.operator,
        "mutation": bug.description,
        "line": bug.line,
        "tests": job.unit.tests,
        "instruction_lazy": f"Fix the bug in {unit}.",
        "origin": job.subject.id,
    }
    ident = xxhash.xxh3_64_hexdigest(f"{job.key}\0{bug.description}\0{bug.line}".encode())
    return {
        "id": f"fix-{ident}",
        "before": bug.source,
        "after": job.subject.source,
        "instruction": f"`{unit}` has a bug: {symptom}. Fix it so that its tests pass.",
        "lang": "python",
        "source": f"fix-tasks:{job.subject.id.split(':')[0]}",
        "meta": json.dumps(meta),
    }


def _symptom(result: ExecutionResult, tests: str) -> str:
    """What the failing tests showed, as a bug report would: the test's line that failed (in the test
    function, not a helper it called) and how."""
    lines = tests.splitlines()
    frames = [n for n in result.failed_test_lines if 0 < n <= len(lines)]
    frame = frames[1] if len(frames) > 1 else frames[0] if frames else None  # [the call, the test, ...]
    where = _without_message(" ".join(lines[frame - 1].split())) if frame else ""
    error = result.detail.strip().splitlines()[-1].strip() if result.detail.strip() else ""
    name, _, message = error.partition(":")
    if not name.isidentifier():
        name, message = "", ""
    how = "fails" if name in ("", "AssertionError") else f"raises {name}"
    if message.strip() and name != "AssertionError" and len(message) <= 80:
        how += f" ({message.strip()})"
    if where and len(where) <= 160:
        return f"`{where}` {how}"
    return f"a test {how}"


def _without_message(line: str) -> str:
    """`assert x == 1, "x"` -> `assert x == 1`: the check, not its message."""
    try:
        statement = ast.parse(line).body[0]
    except (SyntaxError, IndexError, ValueError):
        return line
    return f"assert {ast.unparse(statement.test)}" if isinstance(statement, ast.Assert) else line


def _distinct_units(jobs: list[Job], cfg: BuildConfig, units: Counter[str]) -> list[Job]:
    """Jobs whose unit is no near-copy of an earlier one (pipeline.dedup's MinHash settings)."""
    if not cfg.pipeline.dedup.enabled or len(jobs) < 2:
        return jobs
    from core.neardup.dedup import find_duplicates
    from core.neardup.minhash import minhash_signatures

    minhash = cfg.pipeline.dedup.minhash
    texts = ["\n".join(j.subject.source.splitlines()[j.unit.first - 1 : j.unit.last]) for j in jobs]
    ids = [f"{n:09d}" for n in range(len(jobs))]
    result = find_duplicates(ids, minhash_signatures(texts, minhash), minhash, texts)
    units["near_duplicate"] += sum(1 for keep in result.keep if not keep)
    return [j for j, keep in zip(jobs, result.keep, strict=True) if keep]


def _records(path: Path) -> dict[str, dict[str, Any]]:
    """The units an earlier run of this stage finished (a torn last line is run again)."""
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[record.pop("key")] = record
    return done


def _describe(cfg: BuildConfig) -> str:
    s = cfg.source
    return {"pypi": f"source.packages={s.packages}", "benchmark": "source.benchmarks"}.get(
        s.kind, f"source.paths={s.paths}"
    )
