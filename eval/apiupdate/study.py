"""The editing study: edit a model with each modified API's examples, evaluate, reset or go on.

`EditStudy` runs top to bottom:

1. **pre-edit**: the unedited model answers every problem of the benchmark once per task; the
   samples run in the unmodified environment (the API counted, not changed). Per-model
   filtering, as the study: rows whose task the model does not solve there are left out (so
   pre-edit C@n = P@n = 1.00), except the non-workaroundable rows (App. B reports their
   baselines below 1), and `generalization_canonical` holds the generalization rows
   whose passing pre-edit output calls the target API (its pre-edit figures are recorded too).
2. **edits**: per modified API, an `APIUpdate` from its reliability rows (prompt in the model's
   format, target the modified reference). `single`: the editor is reset before each API's
   edit and only that API's rows are evaluated. `successive`: edits accumulate in a seeded
   order; every `every` edits (and after the last) the rows of every API edited so far are
   evaluated, each in its own modified environment.
3. **score**: C/P/A/W@k per split before and after, and the Shapley split of dPass@k.

Every sample and execution is appended to `OUT/samples.jsonl` (phase in the split name), so a
killed run re-applies its edits (deterministic) and generates and runs only what is missing.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.editing import APIUpdate, EditExample, Editor
from core.formats import PromptFormat
from core.problems import Problem
from core.progress import tqdm
from core.sandbox import Sandbox, SandboxLimits
from eval.apiupdate.enforce import calls_api, run_enforced
from eval.apiupdate.metrics import score_outcomes, shapley_rows
from eval.apiupdate.report import STUDY_SPLITS
from eval.benchmarks.apiupdate import enforced_job
from eval.generate import build_requests, generate_samples
from eval.generation.base import Generator, SamplingConfig
from eval.samples import SampleStore, check_identity, run_missing

log = logging.getLogger(__name__)
REGIMES = ("single", "successive")
EVAL_SPLITS = STUDY_SPLITS  # the canonically filtered generalization rows (Table 5) among them


@dataclass(frozen=True)
class StudyOptions:
    regime: str = "single"
    n: int = 5
    ks: tuple[int, ...] = (1, 3, 5)
    every: int = 0  # successive: evaluate after every `every` edits (0: only after the last)
    seed: int = 0
    per_model_filter: bool = True
    max_apis: int | None = None  # the first N modified APIs, every type of each (after the seeded order)
    # successive: edit budgets (App. D evaluates GRACE after 30, 90 and 270 edits): evaluate at each,
    # and stop at the largest
    budgets: tuple[int, ...] = ()


class EditStudy:
    def __init__(
        self,
        problems: Sequence[Problem],
        editor: Editor,
        make_generator: Callable[[], Generator],
        fmt: PromptFormat,
        sandbox: Sandbox,
        sampling: SamplingConfig,
        options: StudyOptions,
        out: Path,
        limits: SandboxLimits | None = None,
        identity: dict[str, Any] | None = None,
    ):
        self.editor, self.make_generator, self.fmt = editor, make_generator, fmt
        self.sandbox, self.sampling, self.options, self.limits = sandbox, sampling, options, limits
        self.rows = {p.id: p for p in problems}
        check_identity(out, identity or {})
        self.store = SampleStore(out / "samples.jsonl")
        self.by_mod: dict[str, dict[str, list[Problem]]] = defaultdict(lambda: defaultdict(list))
        for p in problems:
            self.by_mod[_mod_id(p)][_split(p)].append(p)
        order = sorted(m for m in self.by_mod if self.by_mod[m]["reliability"])
        if options.regime == "successive":
            random.Random(options.seed).shuffle(order)
        if options.max_apis:  # the first N APIs (every modification of each), not N (API, type) pairs
            kept = set(list(dict.fromkeys(m.rsplit("/", 1)[0] for m in order))[: options.max_apis])
            order = [m for m in order if m.rsplit("/", 1)[0] in kept]
        if options.regime == "successive" and options.budgets:
            order = order[: max(options.budgets)]
        self.order = order
        self.kept: set[str] = set(self.rows)
        self.trajectory: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ generation + execution
    def _samples(self, phase: str, rows: Sequence[Problem], notice: str = "") -> dict[str, list[str]]:
        """Generated code per row under `phase`, made only where samples.jsonl lacks them."""
        n, split = self.options.n, phase
        todo = [_with_notice(p, split, notice) for p in rows if self.store.count(p.id, split) < n]
        if todo:
            generator = self.make_generator()  # the edited model in memory: used, never closed here
            tokenizer = getattr(generator, "tokenizer", None)
            requests = build_requests(todo, [split], self.fmt, tokenizer)
            generate_samples(self.store, requests, generator, self.fmt, n, self.sampling)
        samples = self.store.of_type("sample")
        return {p.id: [samples[(p.id, split, i)]["code"] for i in range(n)] for p in rows}

    def _execute(
        self, phase: str, rows: Sequence[Problem], codes: dict[str, list[str]], env: str
    ) -> list[dict]:
        """Execution records of every sample of `rows` in `env` ("modified" or "unmodified")."""
        split = f"{phase}:{env}"
        todo = [
            ((p.id, split, i), enforced_job(p, code, env)) for p in rows for i, code in enumerate(codes[p.id])
        ]

        def work(chunk: list) -> list[dict[str, Any]]:
            return [o.as_dict() for o in run_enforced(self.sandbox, [job for _, job in chunk], self.limits)]

        run_missing(self.store, "execution", todo, work)
        done = self.store.of_type("execution")
        return [
            {**done[(p.id, split, i)], "type": p.payload.type, "row_split": _split(p)}
            for p in rows
            for i in range(self.options.n)
        ]

    # ------------------------------------------------------------------ the phases
    def pre_edit(self) -> dict[str, Any]:
        """The unedited model in the unmodified environment; sets the per-model filter."""
        rows = [p for m in self.order for ps in self.by_mod[m].values() for p in ps]
        first: dict[str, Problem] = {}  # one generation per task: its rows share the prompt
        for p in rows:
            first.setdefault(p.payload.task_id, p)
        by_task = self._samples("pre", list(first.values()))
        codes = {p.id: by_task[first[p.payload.task_id].id] for p in rows}
        records = self._execute("pre", rows, codes, "unmodified")
        solved = {r["problem"] for r in records if r["passed"]}
        if self.options.per_model_filter:
            # the non-workaroundable rows are exempt (App. B: their pre-edit baselines are below 1)
            self.kept = {p.id for p in rows if p.id in solved or _split(p) == "nonworkaround"}
        canonical = set()
        for p in rows:
            if _split(p) == "generalization" and p.id in solved:
                api = p.payload.api
                if any(
                    r["passed"] and calls_api(code, api)
                    for r, code in zip([r for r in records if r["problem"] == p.id], codes[p.id], strict=True)
                ):
                    canonical.add(p.id)
        self.canonical = canonical
        kept = [r for r in records if r["problem"] in self.kept]
        # Table 5's pre-edit row: the unedited model on the canonical set it defines
        on_canonical = [
            {**r, "row_split": "generalization_canonical"} for r in kept if r["problem"] in canonical
        ]
        return self._metrics(kept + on_canonical)

    def run(self) -> dict[str, Any]:
        before = self.pre_edit()
        edits = tqdm(total=len(self.order), desc=f"editing ({self.options.regime})", unit="edit")
        if self.options.regime == "single":
            records: list[dict] = []
            for step, mod_id in enumerate(self.order, 1):
                edits.update()
                self.editor.reset()
                figures = self.editor.edit(self._update(mod_id))
                records += self._evaluate(f"single@{mod_id}", [mod_id])
                log.info("single %d/%d %s: %s", step, len(self.order), mod_id, _fmt(figures))
            after = self._metrics(records)
        else:
            after = {}
            for step, mod_id in enumerate(self.order, 1):
                edits.update()
                figures = self.editor.edit(self._update(mod_id))
                log.info("successive %d/%d %s: %s", step, len(self.order), mod_id, _fmt(figures))
                last = step == len(self.order)
                every = self.options.every and step % self.options.every == 0
                if last or every or step in self.options.budgets:
                    metrics = self._metrics(self._evaluate(f"successive@{step}", self.order[:step]))
                    self.trajectory.append({"edits": step, "metrics": metrics})
                    after = metrics
        edits.close()
        k = max(k for k in self.options.ks if k <= self.options.n)
        shapley = {
            split: shapley_rows(before[split], after[split], k)
            for split in after
            if split in before and f"pass@{k}" in after[split] and f"pass@{k}" in before[split]
        }
        return {
            "before": before,
            "after": after,
            "shapley": shapley,
            "shapley_k": k,
            "edits": self.order,
            "trajectory": self.trajectory,
            "kept_rows": len(self.kept),
        }

    def _evaluate(self, phase: str, mods: Sequence[str]) -> list[dict]:
        rows = [
            p
            for m in mods
            for split in ("reliability", "generalization", "specificity", "nonworkaround")
            for p in self.by_mod[m][split]
            if p.id in self.kept
        ]
        codes = self._samples(phase, rows, self.editor.notice())
        records = self._execute(phase, rows, codes, "modified")
        canonical = [
            {**r, "row_split": "generalization_canonical"} for r in records if r["problem"] in self.canonical
        ]
        return records + canonical

    def _update(self, mod_id: str) -> APIUpdate:
        return update_of(mod_id, self.by_mod[mod_id]["reliability"], self.fmt)

    def _metrics(self, records: list[dict]) -> dict[str, Any]:
        by_split: dict[str, list[dict]] = defaultdict(list)
        for r in records:
            by_split[r["row_split"]].append(r)
        return {s: score_outcomes(by_split[s], self.options.ks) for s in EVAL_SPLITS if by_split.get(s)}

    def close(self) -> None:
        self.store.close()


def update_of(mod_id: str, rows: Sequence[Problem], fmt: PromptFormat) -> APIUpdate:
    """The `APIUpdate` of one modified API: its reliability rows as edit examples (prompt in the
    model's format, target the modified reference), its notice, and its names as code writes them."""
    mod = rows[0].payload.modification
    examples = tuple(
        EditExample(fmt.prompt(p.before, p.instructions["reliability"]), fmt.completion(p.after))
        for p in rows
    )
    return APIUpdate(mod_id, mod.notice, examples, names=(mod.display, mod.new_name))


def edit_split(problems: Sequence[Problem], fmt: PromptFormat) -> list[APIUpdate]:
    """Every modified API's update, in id order: what editors that learn to edit are fitted on
    (MALMEN, A-GRACE). Only reliability rows, so no test problem is ever trained on."""
    by_mod: dict[str, list[Problem]] = defaultdict(list)
    for p in problems:
        if _split(p) == "reliability":
            by_mod[_mod_id(p)].append(p)
    return [update_of(m, by_mod[m], fmt) for m in sorted(by_mod)]


def _mod_id(p: Problem) -> str:
    return f"{p.payload.api}/{p.payload.type}"


def _split(p: Problem) -> str:
    return next(iter(p.instructions))


def _with_notice(p: Problem, split: str, notice: str) -> Problem:
    """The problem under `split`, its instruction headed by the editor's notice (prompt editing)."""
    text = p.instructions[_split(p)]
    return replace(p, instructions={split: f"{notice}\n\n{text}" if notice else text})


def _fmt(figures: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in figures.items())
