"""Edit a model with API updates and measure whether it adopts them (the API-update editing study).

    python -m eval.apiupdate_edit editor=ft-l regime=single model.path=deepseek-ai/deepseek-coder-6.7b-base
    python -m eval.apiupdate_edit editor=grace regime=successive every=10 model.path=runs/x/final
    python -m eval.apiupdate_edit editor=prompt regime=single model.path=... benchmark.path=data/apiupdate

Editors are named by the `editor` group (ft-l, grace, a-grace, malmen, rome, memit, pmet,
alphaedit, lora, prompt), each a dotted path to a class and its options, so another method
plugs in with `editor.target=pkg.module:Class`. Editors that learn how to edit (MALMEN, A-GRACE)
are fitted on the benchmark's edit split into OUT/editor-fit first, or load
`editor.options.checkpoint`. The
study itself (`eval/apiupdate/study.py`): pre-edit filtering, single (reset before each API)
or successive (edits accumulate, seeded order) regimes, C/P/A/W@k per split before and after,
and the Shapley split of dPass@k. Writes OUT/results.json, OUT/report.md, OUT/plot.png (the
C/P/A/W bars per editor) and OUT/samples.jsonl.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.config import register_schema
from core.dtypes import check_dtype
from core.editing import editor_options
from core.entry import App, run_app
from core.errors import ConfigError
from core.formats import FORMATS
from core.hub import check_model_ref, existing_path
from core.sandbox.config import SandboxConfig
from eval.config import EvalModelConfig, GenConfig

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs" / "apiupdate"
REGIMES = ("single", "successive")
FIT_DIR = "editor-fit"  # where a learned editor's fit goes, inside out
FIT_DONE = "fitted.json"
log = logging.getLogger("eval.apiupdate_edit")


@dataclass
class EditorConfig:
    name: str = "prompt"
    target: str = "train.editors.prompt:PromptEditor"  # package.module:Class
    # The target class's options dataclass (`options`, an EditorOptions) checks these at preflight
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StudyBenchmarkConfig:
    path: str = "data/apiupdate"  # written by python -m eval.build_apiupdate


@dataclass
class StudyGenConfig(GenConfig):
    """eval.run's sampling with the study's 5 samples (Pass@1, 3, 5) and shorter completions."""

    n: int = 5
    max_new_tokens: int = 512
    batch_size: int = 8


@dataclass
class EditRunConfig:
    benchmark: StudyBenchmarkConfig = field(default_factory=StudyBenchmarkConfig)
    model: EvalModelConfig = field(default_factory=EvalModelConfig)  # eval.run's; kind: model
    editor: EditorConfig = field(default_factory=EditorConfig)
    regime: str = "single"  # single | successive
    every: int = 0  # successive: evaluate after every N edits too (0: after the last only)
    seed: int = 0  # the successive order
    ks: list[int] = field(default_factory=lambda: [1, 3, 5])
    per_model_filter: bool = True  # keep the tasks the unedited model solves (the study's protocol)
    max_apis: int | None = None  # the first N modified APIs, every modification of each (quick runs)
    # successive: edit budgets to evaluate at, stopping at the largest (App. D: [30, 90, 270])
    budgets: list[int] = field(default_factory=list)
    gen: StudyGenConfig = field(default_factory=StudyGenConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    out: str = "runs/apiupdate"

    def validate(self) -> None:
        if self.regime not in REGIMES:
            raise ConfigError(f"regime={self.regime!r}: choose one of {REGIMES}")
        if self.budgets and (self.regime != "successive" or min(self.budgets) < 1):
            raise ConfigError(f"budgets={list(self.budgets)}: positive edit counts, for regime=successive")
        if self.model.kind != "model":
            raise ConfigError(
                f"model.kind={self.model.kind!r}: the study edits real weights (model.kind=model)"
            )
        if self.model.prompt_format is not None and self.model.prompt_format not in FORMATS:
            raise ConfigError(
                f"model.prompt_format={self.model.prompt_format!r}: choose one of {sorted(FORMATS)}"
            )
        check_dtype(self.model.dtype, "model.dtype")
        if self.gen.n < 1 or not self.ks or min(self.ks) < 1:
            raise ConfigError("gen.n and every k in ks must be >= 1")
        if min(self.ks) > self.gen.n:
            raise ConfigError(f"ks={self.ks}: at least one k must be <= gen.n={self.gen.n}")
        if self.every < 0:
            raise ConfigError("every must be >= 0")


register_schema("apiupdate_edit_schema", EditRunConfig)


def preflight(cfg: EditRunConfig) -> None:
    existing_path(cfg.benchmark.path, "benchmark.path", "build it with python -m eval.build_apiupdate")
    if not cfg.model.path:
        raise ConfigError("model.path=<hf folder or hub id> is required")
    editor_options(cfg.editor.target, cfg.editor.options)  # a typo fails before the model loads
    check_model_ref(cfg.model.path, "model.path")


def run(cfg: EditRunConfig, resolved: dict[str, Any]) -> None:
    from core.editing import load_editor
    from eval.apiupdate.report import render_study_report
    from eval.apiupdate.study import EditStudy, StudyOptions
    from eval.apiupdate.tables import plot_results
    from eval.benchmarks import get_kind
    from eval.generation.base import SamplingConfig
    from eval.generation.hf import HFGenerator, load_model
    from eval.models import resolve_format

    kind = get_kind("apiupdate")
    problems = kind.load(kind.options(path=cfg.benchmark.path))
    fmt = resolve_format(cfg.model)
    model, tokenizer = load_model(cfg.model.path, cfg.model.dtype, cfg.model.trust_remote_code)
    editor_settings = editor_options(cfg.editor.target, cfg.editor.options)
    editor = load_editor(cfg.editor.target, model, tokenizer, editor_settings)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    fit_editor(editor, problems, fmt, out / FIT_DIR)
    options = StudyOptions(
        regime=cfg.regime,
        n=cfg.gen.n,
        ks=tuple(cfg.ks),
        every=cfg.every,
        seed=cfg.seed,
        per_model_filter=cfg.per_model_filter,
        max_apis=cfg.max_apis,
        budgets=tuple(cfg.budgets),
    )
    sampling = SamplingConfig(
        cfg.gen.temperature, cfg.gen.top_p, cfg.gen.max_new_tokens, fmt.stop, cfg.gen.seed
    )
    with cfg.sandbox.open() as sandbox:
        study = EditStudy(
            problems,
            editor,
            lambda: HFGenerator.from_model(editor.model, editor.tokenizer, cfg.gen.batch_size),
            fmt,
            sandbox,
            sampling,
            options,
            out,
            cfg.sandbox.limits,
            identity={
                "benchmark": cfg.benchmark.path,
                "model": [cfg.model.path, cfg.model.prompt_format, cfg.model.dtype],
                "editor": [cfg.editor.target, asdict(editor_settings)],
                "study": [
                    cfg.regime,
                    cfg.every,
                    cfg.seed,
                    cfg.per_model_filter,
                    cfg.max_apis,
                    list(cfg.budgets),
                ],
                "sampling": [
                    cfg.gen.temperature,
                    cfg.gen.top_p,
                    cfg.gen.max_new_tokens,
                    cfg.gen.seed,
                    cfg.gen.n,
                ],
            },
        )
        try:
            result = study.run()
        finally:
            study.close()
    # what the tables need to say why a split is missing, whether or not the resolved config is kept
    result.update(benchmark=cfg.benchmark.path, max_apis=cfg.max_apis)
    result.update(model=cfg.model.label(), editor=cfg.editor.name, regime=cfg.regime, config=resolved)
    (out / "results.json").write_text(json.dumps(result, indent=2))
    report = render_study_report([result], result["shapley_k"])
    (out / "report.md").write_text(report)
    plot_results([result], result["shapley_k"], out / "plot.png")
    log.info("wrote %s (results.json, report.md, plot.png)", out)
    print(report)


def fit_editor(editor: Any, problems: Any, fmt: Any, folder: Path) -> None:
    """Editors that learn how to edit (MALMEN, A-GRACE) are fitted on the benchmark's edit split
    into `folder` once; a rerun into the same out (a resumed run) loads what was fitted. An editor
    built with `editor.options.checkpoint` is fitted already."""
    from core.editing import LearnedEditor
    from eval.apiupdate.study import edit_split

    if not isinstance(editor, LearnedEditor) or editor.fitted:
        return
    done = folder / FIT_DONE
    if done.exists():
        log.info("loading the %s editor fitted in %s", editor.name, folder)
        editor.load(folder)
        return
    updates = edit_split(problems, fmt)
    log.info(
        "fitting the %s editor on the edit split (%d modified APIs) into %s",
        editor.name,
        len(updates),
        folder,
    )
    figures = editor.fit(updates, folder)
    done.write_text(json.dumps({"editor": editor.name, "apis": len(updates), "figures": figures}, indent=2))


APP = App("edit", EditRunConfig, run=run, preflight=preflight, config_dir=CONFIG_DIR)

if __name__ == "__main__":
    run_app(APP)
