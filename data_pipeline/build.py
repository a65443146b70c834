"""Build an edit-example training set.

    python -m data_pipeline.build pipeline=editpackft source=hub source.name=bigcode/commitpackft \\
        source.subset=python out=data/editpackft
    python -m data_pipeline.build pipeline=commits2023ft source=git 'source.repos=[/src/a,/src/b]' \\
        out=data/commits2023ft
    python -m data_pipeline.build ... executor=ray executor.address=auto
"""

from __future__ import annotations

import json
import logging

import hydra
from omegaconf import DictConfig

from data_pipeline.config import BuildConfig
from data_pipeline.pipeline import run_pipeline
from train.config import CONFIG_DIR, setup_entry_logging, to_validated

log = logging.getLogger("data_pipeline.build")


def to_build_config(cfg: DictConfig) -> BuildConfig:
    return to_validated(cfg, BuildConfig)


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name="build")
def main(cfg: DictConfig) -> None:
    setup_entry_logging()
    manifest = run_pipeline(to_build_config(cfg))
    summary = {k: manifest[k] for k in ("input", "kept", "dropped")}
    log.info("wrote %s: %s", cfg.out, json.dumps(summary))
    if "stats" in manifest:
        from data_pipeline.stats import markdown_table

        print(markdown_table(manifest["stats"]))


if __name__ == "__main__":
    main()
