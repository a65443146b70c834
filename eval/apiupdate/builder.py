"""Build the API-update benchmark: problem-API pairs, modified solutions, seeded splits, a manifest.

1. **Verify** every source program in the sandbox as it is; problems with no passing program
   are dropped (`canonical_fails`, `canonical_does_not_parse`).
2. **Resolve** the builtin/stdlib calls of each solution (`apis.py`) into problem-API pairs;
   an API the prompt itself calls is left out for that problem (`api_in_prompt`), since the
   prompt would show the old API.
3. **Modify**: every modifiable API gets the catalogue's modifications (`catalogue.py`). Each
   pair's solution is rewritten to the new API (`rewrite.py`) and kept only if it passes in the
   enforcing sandbox and calls the new API; the unmodified solution is run there too and must
   end as its type says (R1, S2, S3: old_api; S4: return_type_mismatch; S1: adoption), else the
   pair is dropped (`old_solution_<outcome>`). Then, as the study (App. A.2: one modification per
   API), each API keeps one type, drawn with the seed among the types with enough problems, the
   least used type first (`other_type_of_api`); `types_per_api="all"` (ours) keeps every type.
4. **Split**, seeded: per API, its problems 1:2 into reliability (the edit examples) and
   generalization (at least 2 problems per API), so no API's edit problem is one of its test
   problems, whatever its types (`disjoint="per_api"`, App. A.2); a problem that calls two APIs
   can still be one API's edit example and the other's test problem, which the manifest counts
   (`overlap_across_apis`). `disjoint="across_apis"` (ours) gives each problem one role over all
   APIs and keeps edit problems out of specificity. Specificity from problems that do not call
   the API, rare APIs first, then an even fill; targets 500 / 1,000 / 1,000 with proportional
   downsampling. The
   non-workaroundable set adds its own reliability and `nonworkaround` rows: App. B's five APIs
   with their types (`nonworkaround="appendix_b"`, the default), or our eight (`"extended"`).

Every row in is either kept or counted under a named reason in `manifest.json`.
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.batches import run_all
from core.benchmarks.apiupdate import BUILD_CHOICES
from core.progress import tqdm
from core.sandbox import Sandbox, SandboxLimits
from core.sandbox.declared import unverified_flags
from eval.apiupdate.apis import STDLIB, api_calls, roots_of
from eval.apiupdate.catalogue import (
    TYPES,
    Modification,
    modifiable,
    modifications,
    signature_text,
)
from eval.apiupdate.enforce import EnforcedJob, entry_parameters, run_enforced
from eval.apiupdate.rewrite import Unrewritable, rewrite
from eval.apiupdate.sources import SourceProblem, load_source

log = logging.getLogger(__name__)
SPLITS = ("reliability", "generalization", "specificity", "nonworkaround")
TARGETS = {"reliability": 500, "generalization": 1000, "specificity": 1000}  # the study's
# what the study ended with after filtering (App. A.2), shown beside a build's own sizes
PAPER_SIZES = {"reliability": 469, "generalization": 647, "specificity": 924}
# What the unmodified solution must do under each type, or the pair tells nothing about adoption.
EXPECTED_OLD_OUTCOME = {
    "R1": "old_api",
    "S1": "adoption",
    "S2": "old_api",
    "S3": "old_api",
    "S4": "return_type_mismatch",
}


# the non-workaroundable sets (`nonworkaround=`) and the source each is loaded from
NONWORKAROUND_SOURCES = {"appendix_b": "appendix_b", "extended": "nonworkaround", "none": None}


@dataclass
class BuildOptions:
    seed: int = 0
    targets: dict[str, int] = field(default_factory=lambda: dict(TARGETS))
    min_problems: int = 2  # per modified API, to have both reliability and generalization rows
    types: tuple[str, ...] = TYPES
    types_per_api: str = "one"  # one (the study's) | all (ours): see BUILD_CHOICES
    s4_form: str = "tuple"  # the study's `[0]`; "value": ours, `.value`
    nonworkaround: str = "appendix_b"  # appendix_b (the study's) | extended (ours) | none
    disjoint: str = "per_api"  # per_api (the study's) | across_apis (ours): see split()
    limit: int | None = None  # the first N source problems (quick runs)

    def __post_init__(self) -> None:
        for name, choices in BUILD_CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r}: choose one of {choices}")


@dataclass
class Pair:
    problem: SourceProblem
    program: str  # the canonical program that calls the API
    modification: Modification
    reference: str = ""  # the program rewritten to the modified API
    old_outcome: str | None = None  # what the unmodified program did under the modification


@dataclass
class Build:
    rows: list[dict[str, Any]]
    apis: list[dict[str, Any]]
    manifest: dict[str, Any]


def instruction(problem: SourceProblem) -> str:
    if problem.entry_point == "Solution":
        return "Complete the `Solution` class so that it solves the problem in the docstring."
    return f"Complete the function `{problem.entry_point}` so that it does what its docstring says."


class Builder:
    def __init__(
        self,
        sandbox: Sandbox,
        options: BuildOptions,
        limits: SandboxLimits | None = None,
        progress: Callable[[str, int], None] | None = None,
    ):
        self.sandbox, self.options, self.limits = sandbox, options, limits
        self.rng = random.Random(options.seed)
        self.dropped: dict[str, Counter] = defaultdict(Counter)  # stage -> reason -> count
        self.progress = progress or (lambda stage, n: None)

    # ------------------------------------------------------------------ 1. verify
    def verify(self, loaded: Iterable[SourceProblem | tuple[str, str]]) -> list[SourceProblem]:
        problems: list[SourceProblem] = []
        inputs = 0
        for item in loaded:
            if self.options.limit is not None and inputs >= self.options.limit:
                break
            inputs += 1
            if isinstance(item, tuple):
                self.dropped["problems"][item[1]] += 1
            else:
                problems.append(item)
        self.inputs = inputs
        jobs, owners = [], []
        parsed: dict[int, list[str]] = defaultdict(list)
        for i, problem in enumerate(problems):
            for program in problem.programs:
                try:
                    compile(program, "<canonical>", "exec", dont_inherit=True)
                except (SyntaxError, ValueError):
                    continue
                parsed[i].append(program)
                jobs.append((program, problem.tests))
                owners.append((i, program))
        # the datasets' own solutions and tests: one that needs numpy runs in the declared unverified mode
        unverified = unverified_flags(self.sandbox, jobs)
        results = _chunked(
            "verifying",
            list(range(len(jobs))),
            lambda ids: self.sandbox.run_many(
                [jobs[i] for i in ids], limits=self.limits, unverified=[unverified[i] for i in ids]
            ),
        )
        self.progress("verify", len(jobs))
        passing: dict[int, list[str]] = defaultdict(list)
        for (i, program), result in zip(owners, results, strict=True):
            if result.passed:
                passing[i].append(program)
        kept = []
        for i, problem in enumerate(problems):
            if not parsed[i]:
                self.dropped["problems"]["canonical_does_not_parse"] += 1
            elif not passing[i]:
                self.dropped["problems"]["canonical_fails"] += 1
            else:
                kept.append(_with_programs(problem, passing[i]))
        return kept

    # ------------------------------------------------------------------ 2. resolve
    def pairs_by_api(self, problems: list[SourceProblem]) -> dict[str, list[tuple[SourceProblem, str]]]:
        by_api: dict[str, list[tuple[SourceProblem, str]]] = defaultdict(list)
        for problem in problems:
            chosen: dict[str, str] = {}
            in_prompt: set[str] = set()
            # a fixture names its API, which may lie outside the standard library (torch)
            roots = roots_of(problem.meta["api"]) if "api" in problem.meta else frozenset(STDLIB)
            for program in problem.programs:
                for call in api_calls(program, roots):
                    if call.node.lineno <= problem.prompt_lines:
                        in_prompt.add(call.api)
                    else:
                        chosen.setdefault(call.api, program)
            for api, program in chosen.items():
                if api in in_prompt:
                    self.dropped["pairs"]["api_in_prompt"] += 1
                else:
                    by_api[api].append((problem, program))
        return by_api

    # ------------------------------------------------------------------ 3. modify
    def modified_pairs(
        self, by_api: dict[str, list[tuple[SourceProblem, str]]], fixed: dict[str, str] | None = None
    ) -> list[Pair]:
        """The pairs whose rewritten solution adopts the new API and whose old one fails as its type
        says; `fixed` gives an API its one type (the App. B set), else `types_per_api` decides."""
        candidates: list[Pair] = []
        for api in sorted(by_api):
            for mod in modifications(api, self.options.s4_form):
                if mod.type not in self.options.types or (fixed and fixed.get(api, mod.type) != mod.type):
                    continue
                for problem, program in by_api[api]:
                    pair = Pair(problem, program, mod)
                    try:
                        pair.reference = rewrite(program, mod)
                    except (Unrewritable, SyntaxError) as err:
                        log.debug("%s %s: %s", problem.task_id, mod.id, err)
                        self.dropped["pairs"]["unrewritable"] += 1
                        continue
                    candidates.append(pair)
        jobs = []
        for pair in candidates:
            n = entry_parameters(pair.program, pair.problem.entry_point)
            jobs.append(
                EnforcedJob(
                    pair.reference, pair.modification, pair.problem.tests, pair.problem.entry_point, n
                )
            )
            jobs.append(
                EnforcedJob(pair.program, pair.modification, pair.problem.tests, pair.problem.entry_point, n)
            )
        outcomes = _chunked("modifying", jobs, lambda chunk: run_enforced(self.sandbox, chunk, self.limits))
        self.progress("modify", len(jobs))
        kept = []
        for k, pair in enumerate(candidates):
            new, old = outcomes[2 * k], outcomes[2 * k + 1]
            if new.outcome != "adoption":
                self.dropped["pairs"][f"modified_solution_{new.outcome}"] += 1
            elif old.outcome != EXPECTED_OLD_OUTCOME[pair.modification.type]:
                self.dropped["pairs"][f"old_solution_{old.outcome}"] += 1
            else:
                pair.old_outcome = old.outcome
                kept.append(pair)
        if fixed is None and self.options.types_per_api == "one":
            return self.one_type_per_api(kept)
        return kept

    def one_type_per_api(self, pairs: list[Pair]) -> list[Pair]:
        """One modification per API (App. A.2), drawn with the seed among the types that have
        enough problems, the type fewest APIs have so far first (the types stay balanced)."""
        by_api: dict[str, dict[str, list[Pair]]] = defaultdict(lambda: defaultdict(list))
        for pair in pairs:
            by_api[pair.modification.api][pair.modification.type].append(pair)
        apis = sorted(by_api)
        self.rng.shuffle(apis)
        used: Counter = Counter()
        kept: list[Pair] = []
        for api in apis:
            types = by_api[api]
            enough = [t for t in sorted(types) if _problems(types[t]) >= self.options.min_problems]
            viable = enough or sorted(types)
            fewest = min(used[t] for t in viable)
            choice = self.rng.choice([t for t in viable if used[t] == fewest])
            used[choice] += 1
            kept.extend(types[choice])
            self.dropped["pairs"]["other_type_of_api"] += sum(len(types[t]) for t in types if t != choice)
        return kept

    # ------------------------------------------------------------------ 4. split
    def split(self, pairs: list[Pair]) -> dict[str, list[Pair]]:
        """Per API, its problems 1:2 into reliability and generalization; each type's pairs follow
        their problem, so the two splits share no problem of an API. `disjoint="across_apis"`
        also keeps a problem in one role for every API (see `_roles_across_apis`)."""
        by_api: dict[str, list[Pair]] = defaultdict(list)
        for pair in pairs:
            by_api[pair.modification.api].append(pair)
        tasks = {api: sorted({p.problem.task_id for p in group}) for api, group in by_api.items()}
        if self.options.disjoint == "across_apis":
            roles = self._roles_across_apis(tasks)
        else:
            roles = {api: self._roles_per_api(tasks[api]) for api in sorted(tasks)}
        assigned: dict[str, tuple[list[Pair], list[Pair]]] = {}
        for api in sorted(by_api):
            role = roles.get(api)
            if role is None:
                few = len(tasks[api]) < self.options.min_problems
                reason = "too_few_problems_for_api" if few else "no_disjoint_split_for_api"
                self.dropped["pairs"][reason] += len(by_api[api])
                continue
            order = {task: i for i, task in enumerate(role)}
            group = sorted(by_api[api], key=lambda p: (order[p.problem.task_id], p.modification.type))
            assigned[api] = (
                [p for p in group if role[p.problem.task_id] == "reliability"],
                [p for p in group if role[p.problem.task_id] == "generalization"],
            )
        targets = self.options.targets
        for index, split in enumerate(("reliability", "generalization")):
            total = sum(len(parts[index]) for parts in assigned.values())
            if total > targets[split]:
                factor = targets[split] / total
                for parts in assigned.values():
                    keep = max(1, round(len(parts[index]) * factor))
                    self.dropped["pairs"][f"downsampled_{split}"] += len(parts[index]) - keep
                    del parts[index][keep:]
        return {
            "reliability": [p for parts in assigned.values() for p in parts[0]],
            "generalization": [p for parts in assigned.values() for p in parts[1]],
        }

    def _roles_per_api(self, tasks: list[str]) -> dict[str, str] | None:
        """App. A.2: shuffle the API's problems, the first third to reliability, the rest to
        generalization; None when the API has too few problems for both."""
        if len(tasks) < self.options.min_problems:
            return None
        shuffled = list(tasks)
        self.rng.shuffle(shuffled)
        n_rel = max(1, round(len(shuffled) / 3))
        return {task: "reliability" if i < n_rel else "generalization" for i, task in enumerate(shuffled)}

    def _roles_across_apis(self, tasks: dict[str, list[str]]) -> dict[str, dict[str, str]]:
        """One role per problem over all APIs, so no API's edit example is another API's test
        problem. APIs with the fewest problems choose first (they have the least room); a problem
        keeps the role an earlier API gave it, and the API's unassigned problems fill it towards
        1:2. An API left without a reliability or a generalization problem is dropped."""
        global_role: dict[str, str] = {}
        apis = sorted(tasks)
        self.rng.shuffle(apis)
        apis.sort(key=lambda a: len(tasks[a]))  # stable: the seeded order breaks ties
        roles: dict[str, dict[str, str]] = {}
        for api in apis:
            if len(tasks[api]) < self.options.min_problems:
                continue
            free = [t for t in tasks[api] if t not in global_role]
            self.rng.shuffle(free)
            fixed = [global_role[t] for t in tasks[api] if t in global_role]
            n_rel = _reliability_share(len(tasks[api]), fixed, len(free))
            if n_rel is None:
                continue
            for i, task in enumerate(free):
                global_role[task] = "reliability" if i < n_rel else "generalization"
            # its own problems first, in their shuffled order: downsampling cuts from the end
            roles[api] = {t: global_role[t] for t in free + [t for t in tasks[api] if t not in free]}
        return roles

    def specificity(
        self, problems: list[SourceProblem], mods: list[Modification], edit_tasks: set[str] = frozenset()
    ) -> list[Pair]:
        """Per modified API, problems that never call it: rare APIs first, then an even fill.
        `edit_tasks` (the reliability problems, under `disjoint="across_apis"`) are left out, so
        no problem the model was edited on is a specificity test."""
        if not mods:
            return []
        problems = [p for p in problems if p.task_id not in edit_tasks]
        uses = {p.task_id: {c.api for prog in p.programs for c in api_calls(prog)} for p in problems}
        frequency = Counter(api for apis in uses.values() for api in apis)
        quota = math.ceil(self.options.targets["specificity"] / len(mods))
        chosen: list[Pair] = []
        for mod in mods:
            pool = [p for p in problems if mod.api not in uses[p.task_id]]
            groups: dict[str, list[SourceProblem]] = defaultdict(list)
            for p in pool:
                rarest = min(uses[p.task_id], key=lambda a: (frequency[a], a), default="")
                groups[rarest].append(p)
            order = sorted(groups, key=lambda a: (frequency[a] if a else 0, a))
            for api in order:
                self.rng.shuffle(groups[api])
            picked: list[SourceProblem] = []
            while len(picked) < quota and any(groups[a] for a in order):
                for api in order:  # one per group per round: rare groups first, then evenly
                    if groups[api] and len(picked) < quota:
                        picked.append(groups[api].pop())
            chosen.extend(Pair(p, p.programs[0], mod, p.programs[0]) for p in picked)
        total = self.options.targets["specificity"]
        if len(chosen) > total:
            self.rng.shuffle(chosen)
            self.dropped["pairs"]["downsampled_specificity"] += len(chosen) - total
            chosen = chosen[:total]
        jobs = [
            EnforcedJob(
                p.program,
                p.modification,
                p.problem.tests,
                p.problem.entry_point,
                entry_parameters(p.program, p.problem.entry_point),
            )
            for p in chosen
        ]
        outcomes = _chunked("specificity", jobs, lambda chunk: run_enforced(self.sandbox, chunk, self.limits))
        self.progress("specificity", len(jobs))
        kept = []
        for pair, outcome in zip(chosen, outcomes, strict=True):
            if outcome.passed:
                kept.append(pair)
            else:
                self.dropped["pairs"][f"specificity_{outcome.outcome}"] += 1
        return kept


CHUNK = 256  # sandbox runs per call: big enough to keep every worker busy, small enough to show progress


def _chunked(desc: str, items: list, run: Callable[[list], list]) -> list:
    """`run` over `items` through `core.batches` under a progress bar: an APPS build runs tens of
    thousands of programs. Nothing is kept between builds (the build writes its output at its end),
    and chunks run one after another, as they always have."""
    with tqdm(total=len(items), desc=desc, unit="run", disable=not items) as bar:
        return run_all(items, run, label=desc, progress=bar.update, chunk=CHUNK, in_flight=1)


def _reliability_share(total: int, fixed: list[str], n_free: int) -> int | None:
    """How many of an API's `n_free` unassigned problems go to reliability so that its share
    approaches a third, given the roles other APIs `fixed` for the rest, with at least one
    problem in each split; None when that cannot be."""
    have_rel = fixed.count("reliability")
    target = max(1, round(total / 3))
    n_rel = min(max(0, target - have_rel), n_free)
    if "generalization" not in fixed and 0 < n_rel == n_free:
        n_rel -= 1  # keep one for generalization
    has_rel = have_rel + n_rel > 0
    has_gen = len(fixed) - have_rel + (n_free - n_rel) > 0
    return n_rel if has_rel and has_gen else None


def _problems(pairs: list[Pair]) -> int:
    return len({p.problem.task_id for p in pairs})


def _with_programs(problem: SourceProblem, programs: list[str]) -> SourceProblem:
    return replace(problem, programs=tuple(programs))


def _row(pair: Pair, split: str) -> dict[str, Any]:
    problem, mod = pair.problem, pair.modification
    return {
        "id": f"{problem.task_id}::{mod.id}::{split}",
        "task_id": problem.task_id,
        "source": problem.source,
        "split": split,
        "api": mod.api,
        "type": mod.type,
        "modification": mod.spec(),
        "prompt": problem.prompt,
        "reference": pair.reference,
        "original": pair.program,
        "tests": problem.tests,
        "entry_point": problem.entry_point,
        "n_params": entry_parameters(pair.program, problem.entry_point),
        "instruction": instruction(problem),
        "old_outcome": pair.old_outcome,
    }


def build(
    source: str,
    path: str | None,
    sandbox: Sandbox,
    options: BuildOptions,
    limits: SandboxLimits | None = None,
    hub_split: str | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> Build:
    """Build the benchmark from `source`; see the module docstring for the steps."""
    builder = Builder(sandbox, options, limits, progress)
    problems = builder.verify(load_source(source, path, hub_split))
    by_api = builder.pairs_by_api(problems)
    pairs = builder.modified_pairs(by_api)
    splits = builder.split(pairs)
    mods = sorted(
        {p.modification.id: p.modification for p in splits["reliability"]}.values(), key=lambda m: m.id
    )
    edit_tasks = (
        {p.problem.task_id for p in splits["reliability"]} if options.disjoint == "across_apis" else set()
    )
    splits["specificity"] = builder.specificity(problems, mods, edit_tasks)
    splits["nonworkaround"] = []
    fixtures = NONWORKAROUND_SOURCES[options.nonworkaround]
    if fixtures:
        _add_nonworkaround(builder, splits, fixtures, sandbox, limits, progress)
    rows = [_row(pair, split) for split in SPLITS for pair in splits[split]]
    apis = _api_table(by_api, pairs)
    manifest = _manifest(source, path, options, builder, problems, rows, apis)
    return Build(rows, apis, manifest)


def _add_nonworkaround(
    builder: Builder, splits: dict[str, list[Pair]], source: str, sandbox, limits, progress
):
    """The non-workaroundable set's rows: its edit problems join reliability, the others form
    `nonworkaround`. A fixture is about its own API (its other calls, len or str, are not what it
    tests); App. B's rows also name their API's one type."""
    options = builder.options
    extra = Builder(
        sandbox,
        BuildOptions(seed=options.seed, types=options.types, min_problems=1, s4_form=options.s4_form),
        limits,
        progress,
    )
    problems = extra.verify(load_source(source, None))
    about = {
        api: [(p, prog) for p, prog in found if p.meta.get("api") == api]
        for api, found in extra.pairs_by_api(problems).items()
    }
    about = {api: found for api, found in about.items() if found}
    for problem in problems:
        api = problem.meta.get("api")
        if api and api not in about:
            extra.dropped["pairs"]["api_not_called"] += 1
        elif api and not modifications(api):
            extra.dropped["pairs"][f"api_{modifiable(api)}"] += 1  # torch missing: not_found
    fixed = {p.meta["api"]: p.meta["type"] for p in problems if "type" in p.meta}
    for pair in extra.modified_pairs(about, fixed):
        role = "reliability" if pair.problem.meta.get("role") == "edit" else "nonworkaround"
        splits[role].append(pair)
    for name, counts in extra.dropped.items():
        for reason, n in counts.items():
            builder.dropped[f"nonworkaround_{name}"][reason] += n


def _api_table(by_api: dict[str, list], pairs: list[Pair]) -> list[dict[str, Any]]:
    kept = Counter(p.modification.api for p in pairs)
    types: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        types[p.modification.api].add(p.modification.type)
    table = []
    for api in sorted(by_api, key=lambda a: (-len(by_api[a]), a)):
        reason = modifiable(api)
        table.append(
            {
                "api": api,
                "problems": len(by_api[api]),
                "modifiable": reason is None,
                "reason": reason,
                "signature": signature_text(api),
                "types": sorted(types[api]),
                "kept_pairs": kept[api],
            }
        )
    return table


def _manifest(source, path, options, builder, problems, rows, apis) -> dict[str, Any]:
    by_split = Counter(r["split"] for r in rows)
    by_type = {s: dict(Counter(r["type"] for r in rows if r["split"] == s)) for s in SPLITS}
    by_api = defaultdict(Counter)
    for r in rows:
        by_api[r["api"]][r["split"]] += 1
    modified = sorted(
        {r["modification"]["api"] + "/" + r["type"] for r in rows if r["split"] != "specificity"}
    )
    return {
        "source": source,
        "path": path,
        "seed": options.seed,
        "targets": options.targets,
        "types": list(options.types),
        "types_per_api": options.types_per_api,
        "s4_form": options.s4_form,
        "nonworkaround": options.nonworkaround,
        "input_problems": builder.inputs,
        "verified_problems": len(problems),
        "dropped": {stage: dict(sorted(c.items())) for stage, c in builder.dropped.items()},
        "rows": len(rows),
        "rows_per_split": {s: by_split.get(s, 0) for s in SPLITS},
        "rows_per_type": by_type,
        "rows_per_api": {api: dict(c) for api, c in sorted(by_api.items())},
        "apis_called": len(apis),
        "apis_modifiable": sum(a["modifiable"] for a in apis),
        "modified_apis": modified,
        "distinct_modified_apis": len({m.rsplit("/", 1)[0] for m in modified}),
        "distinct_synthetic_apis": len(modified),
        "disjoint": options.disjoint,
        **_overlap(rows),
        "split_sizes": _split_sizes(rows),
    }


def _overlap(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Problems that are an edit example (reliability) for one API and a test problem for another:
    with the generalization rows (`overlap_across_apis`) and with the specificity rows."""
    tasks = {s: {r["task_id"] for r in rows if r["split"] == s} for s in SPLITS}
    return {
        "overlap_across_apis": len(tasks["reliability"] & tasks["generalization"]),
        "overlap_reliability_specificity": len(tasks["reliability"] & tasks["specificity"]),
    }


def _split_sizes(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The built split sizes (problem-API rows, the non-workaroundable set apart, as the study
    counts it) beside the sizes App. A.2 reports."""
    fixtures = {name for name in NONWORKAROUND_SOURCES.values() if name}
    main = Counter(r["split"] for r in rows if r["source"] not in fixtures)
    return {split: {"built": main.get(split, 0), "paper": n} for split, n in PAPER_SIZES.items()}


def write(build_result: Build, out: Path) -> None:
    """problems.jsonl, apis.jsonl and manifest.json into `out`, each written whole then renamed."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "problems.jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in build_result.rows),
        "apis.jsonl": "".join(json.dumps(a) + "\n" for a in build_result.apis),
        "manifest.json": json.dumps(build_result.manifest, indent=2) + "\n",
    }
    for name, text in files.items():
        tmp = out / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out / name)
