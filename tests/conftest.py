"""Shared fixtures: Hydra composition of the real configs, tiny tokenizers, CPU-only runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.pop("WANDB_API_KEY", None)  # tests never log online


def compose(overrides: list[str]):
    """Compose configs/sft.yaml with `overrides`, exactly as `train/sft.py` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import train.config  # noqa: F401  (registers the structured schema)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return hydra_compose(config_name="sft", overrides=overrides)


def app_config(overrides: list[str]):
    from omegaconf import OmegaConf

    from train.config import to_app_config

    cfg = compose(overrides)
    return to_app_config(cfg), OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


@pytest.fixture
def tiny_tokenizer():
    from core.formats import FORMATS
    from train.modeling import train_tiny_tokenizer
    from train.synthetic_edits import synthetic_edits

    fmt = FORMATS["editcoder"]
    rows = synthetic_edits(300, seed=1)
    texts = [fmt.prompt(r["before"], r["instruction"]) + fmt.completion(r["after"]) for r in rows]
    return train_tiny_tokenizer(texts, vocab_size=512)


def python_cmd() -> list[str]:
    return [sys.executable]


def torchrun_cmd(nproc: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]


def compose_build(overrides: list[str]):
    """Compose configs/build.yaml with `overrides`, as `python -m data_pipeline.build` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import data_pipeline.config  # noqa: F401  (registers the structured schema)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return hydra_compose(config_name="build", overrides=overrides)
