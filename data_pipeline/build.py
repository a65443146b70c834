"""Build an edit-example training set.

    python -m data_pipeline.build pipeline=editpackft source=hub source.name=bigcode/commitpackft \\
        source.subset=python out=data/editpackft
    python -m data_pipeline.build pipeline=commits2023ft source=git 'source.repos=[/src/a,/src/b]' \\
        out=data/commits2023ft
    python -m data_pipeline.build ... executor=ray executor.address=auto

The config is validated (paths, repositories, rule names, MinHash parameters, benchmark
sources) before datasets and the pipeline are imported.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from core.config import to_validated
from core.entry import App, run_app
from core.hub import check_hub_dataset, hub_offline
from data_pipeline.config import BuildConfig

log = logging.getLogger("data_pipeline.build")


def to_build_config(cfg: Any) -> BuildConfig:
    return to_validated(cfg, BuildConfig)


def preflight(cfg: BuildConfig) -> None:
    """A hub source finds out now whether the hub is reachable (no retry storm offline) and, offline,
    whether the cache holds it; the decontamination's benchmarks are checked now, not after the
    stages before it. Nothing is written into `out` before these pass."""
    if cfg.source.kind == "hub" or cfg.push_to_hub:
        hub_offline()
    if cfg.source.kind == "hub":
        check_hub_dataset(cfg.source.name, cfg.source.subset, "source.name")
    if cfg.pipeline.decontaminate.enabled:
        from data_pipeline.decontam import usable_sources

        usable_sources(cfg.pipeline.decontaminate)


def build(cfg: BuildConfig, resolved: dict[str, Any]) -> None:
    from data_pipeline.pipeline import run_pipeline
    from data_pipeline.stages import top_reasons

    manifest = run_pipeline(cfg)
    summary = {k: manifest[k] for k in ("input", "kept", "dropped")}
    log.info("wrote %s: %s", cfg.out, json.dumps(summary))
    if not manifest["kept"]:
        log.warning(
            "%s is empty: the pipeline dropped all %d rows (%s); loosen pipeline.filters or check the input",
            cfg.out,
            manifest["input"],
            top_reasons(manifest["dropped"]),
        )
    if "stats" in manifest:
        from data_pipeline.stats import markdown_table

        print(markdown_table(manifest["stats"]))


APP = App("build", BuildConfig, run=build, preflight=preflight)

if __name__ == "__main__":
    run_app(APP)
