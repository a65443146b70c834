"""Structured configs for `train/sft.py`.

Every Hydra group used by the SFT entry point is backed by a dataclass here, so an unknown
key or a value of the wrong type fails at start-up with a message that names the key.
Cross-field checks live in each dataclass's `validate`, which `to_app_config` runs right
after Hydra composes the config: before any dataset or model is loaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"
DEEPSPEED_DIR = CONFIG_DIR / "deepspeed"


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the key and the fix."""


class AttnImpl(str, Enum):
    flash_attention_2 = "flash_attention_2"
    sdpa = "sdpa"
    eager = "eager"
    auto = "auto"  # flash_attention_2 where flash-attn and CUDA exist, else sdpa


class DType(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"


class LossOn(str, Enum):
    completion = "completion"  # loss on the edited code (and EOS) only
    all = "all"  # whole text, as the released EditCoder code did


class Overlong(str, Enum):
    drop = "drop"
    truncate = "truncate"


@dataclass
class TinyModelConfig:
    """A randomly initialised Llama built from a config, with a BPE tokenizer trained on the data."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 176
    vocab_size: int = 1024
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    # Embedding/LM-head rows when more than the trained tokenizer has: a real model's vocabulary
    # (DeepSeek-Coder: 32256), so a model built from its config has its exact shape and cost.
    embedding_size: int | None = None


@dataclass
class ModelConfig:
    path: str | None = None  # hub id or local folder
    revision: str | None = None
    trust_remote_code: bool = False
    tiny: TinyModelConfig | None = None

    def validate(self) -> None:
        if (self.path is None) == (self.tiny is None):
            raise ConfigError(
                "recipe.model: set exactly one of recipe.model.path (hub id or folder) "
                "and recipe.model.tiny (a model built from a config)"
            )


@dataclass
class LoraConfig:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    merge: bool = False  # also write the merged full model to DIR/final (adapter goes to DIR/final-adapter)


@dataclass
class WandbConfig:
    project: str = "editforge"
    tags: list[str] = field(default_factory=list)
    mode: str | None = None  # online | offline | disabled; default: offline when no API key is set


@dataclass
class RecipeConfig:
    name: str = "tiny"
    model: ModelConfig = field(default_factory=ModelConfig)
    attn_implementation: AttnImpl = AttnImpl.sdpa
    dtype: DType = DType.fp32
    gradient_checkpointing: bool = False
    prompt_format: str = "editcoder"
    loss_on: LossOn = LossOn.completion
    max_length: int = 8192
    packing: bool = True
    overlong: Overlong = Overlong.drop
    lr: float = 2e-5
    lr_scheduler: str = "linear"
    warmup_steps: int = 10
    epochs: float = 8.0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    per_device_batch_size: int = 1
    grad_accum: int = 4
    lora: LoraConfig | None = None
    wandb: WandbConfig = field(default_factory=WandbConfig)

    def validate(self) -> None:
        from train.formats import FORMATS

        self.model.validate()
        if self.prompt_format not in FORMATS:
            raise ConfigError(
                f"recipe.prompt_format={self.prompt_format!r} is unknown; choose one of {sorted(FORMATS)}"
            )
        for key in ("max_length", "per_device_batch_size", "grad_accum"):
            if getattr(self, key) < 1:
                raise ConfigError(f"recipe.{key} must be >= 1, got {getattr(self, key)}")
        if self.lr <= 0:
            raise ConfigError(f"recipe.lr must be > 0, got {self.lr}")


@dataclass
class DatasetSpec:
    """One dataset of a mix: a hub id, a local jsonl/parquet file or a `save_to_disk` folder."""

    path: str | None = None
    subset: str | None = None  # hub config name (e.g. "python" for bigcode/commitpackft)
    split: str = "train"
    weight: float = 1.0  # row multiplier: 0.5 takes half the rows, 2.0 repeats them twice
    columns: dict[str, str] = field(default_factory=dict)  # source column -> contract column
    synthetic: int | None = None  # generate this many synthetic edits instead of loading

    def validate(self) -> None:
        if (self.path is None) == (self.synthetic is None):
            raise ConfigError("data.datasets[]: set exactly one of `path` and `synthetic`")
        if self.weight <= 0:
            raise ConfigError(f"data.datasets[].weight must be > 0, got {self.weight} for {self.path}")


@dataclass
class DataConfig:
    path: str | None = None  # one dataset; replaces `datasets` when set
    columns: dict[str, str] = field(default_factory=dict)  # column mapping for `path`
    datasets: list[DatasetSpec] = field(default_factory=list)
    val_size: float = 0.02  # fraction (< 1) or number of rows (>= 1) held out
    seed: int = 1234  # shuffle seed
    max_examples: int | None = None  # cap after mixing and shuffling (quick experiments)

    def specs(self) -> list[DatasetSpec]:
        if self.path is not None:
            return [DatasetSpec(path=self.path, columns=dict(self.columns))]
        return list(self.datasets)

    def validate(self) -> None:
        if self.path is None and not self.datasets:
            raise ConfigError("data: no dataset given; set data.path=PATH or pick a data config (data=NAME)")
        if self.val_size < 0:
            raise ConfigError(f"data.val_size must be >= 0, got {self.val_size}")


@dataclass
class RunConfig:
    output_dir: str = "runs/default"
    max_steps: int = -1  # > 0 overrides recipe.epochs
    save_steps: int = 500
    save_total_limit: int = 3
    logging_steps: int = 10
    eval_steps: int | None = None  # None: evaluate at the end only
    seed: int = 42
    resume: str = "auto"  # auto | never | path to a checkpoint folder
    report_to: str = "wandb"  # wandb | none
    peak_tflops: float | None = None  # per device, for MFU; detected on known GPUs
    dataset_num_proc: int | None = None
    dataloader_num_workers: int = 0

    def validate(self) -> None:
        if self.report_to not in ("wandb", "none"):
            raise ConfigError(f"run.report_to must be 'wandb' or 'none', got {self.report_to!r}")
        if self.resume not in ("auto", "never") and not Path(self.resume).is_dir():
            raise ConfigError(
                f"run.resume={self.resume!r}: use auto, never, or an existing checkpoint folder"
            )


@dataclass
class SFTAppConfig:
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    data: DataConfig = field(default_factory=DataConfig)
    run: RunConfig = field(default_factory=RunConfig)
    deepspeed_config: str | None = None  # zero2 | zero3 | zero3-offload (configs/deepspeed) or a json path

    def validate(self) -> None:
        self.recipe.validate()
        self.data.validate()
        for spec in self.data.specs():
            spec.validate()
        self.run.validate()
        if self.deepspeed_config is not None:
            deepspeed_config_path(self.deepspeed_config)  # raises when missing
        lora = self.recipe.lora
        if (
            lora is not None
            and lora.merge
            and self.deepspeed_config
            and zero_stage(self.deepspeed_config) == 3
        ):
            raise ConfigError(
                "recipe.lora.merge=true cannot merge in memory under ZeRO-3 (weights are sharded); "
                "train with recipe.lora.merge=false and merge the saved adapter afterwards"
            )


def deepspeed_config_path(name_or_path: str) -> str:
    """Resolve `zero3` to configs/deepspeed/zero3.json, or accept a json path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".json" and candidate.is_file():
        return str(candidate.resolve())
    named = DEEPSPEED_DIR / f"{name_or_path}.json"
    if named.is_file():
        return str(named)
    known = sorted(p.stem for p in DEEPSPEED_DIR.glob("*.json"))
    raise ConfigError(f"deepspeed_config={name_or_path!r}: not a json file nor one of {known}")


def zero_stage(name_or_path: str) -> int:
    config = json.loads(Path(deepspeed_config_path(name_or_path)).read_text())
    return int(config.get("zero_optimization", {}).get("stage", 0))


def to_validated(cfg: Any, schema: type[T]) -> T:
    """A composed Hydra config as validated dataclasses of `schema` (runs every `validate`).

    Shared by the three entry points (train/sft.py, data_pipeline.build, eval.run).
    """
    from omegaconf import OmegaConf

    try:
        parsed = OmegaConf.to_object(cfg)
    except Exception as err:  # OmegaConf validation errors name the key already
        raise ConfigError(str(err)) from err
    if not isinstance(parsed, schema):
        raise ConfigError(f"the config is not a {schema.__name__} (is its schema the first default?)")
    try:
        parsed.validate()
    except ConfigError:
        raise
    except ValueError as err:  # a module's own validation: same error type for every entry point
        raise ConfigError(str(err)) from err
    return parsed


def to_app_config(cfg: Any) -> SFTAppConfig:
    return to_validated(cfg, SFTAppConfig)


def setup_entry_logging() -> None:
    """Plain INFO logging for the single-process entry points (data_pipeline.build, eval.run)."""
    import logging

    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO, force=True
    )


def wandb_has_key() -> bool:
    """True when a W&B API key is configured (env or netrc), i.e. online logging can work."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    import netrc

    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (FileNotFoundError, netrc.NetrcParseError):
        return False
    return bool(auth and auth[2])


ConfigStore.instance().store(name="sft_schema", node=SFTAppConfig)
