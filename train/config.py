"""Structured configs for `train/sft.py`.

Every Hydra group used by the SFT entry point is backed by a dataclass here, so an unknown
key or a value of the wrong type fails at start-up with a message that names the key.
Cross-field checks live in each dataclass's `validate`, which `to_app_config` runs right
after Hydra composes the config; `preflight` then checks this machine (data paths exist, the
packages the config needs are installed, the hub is reachable) before train/sft.py imports
the training stack.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from core.config import CONFIG_DIR, ModelConfig, WandbConfig, register_schema, to_validated
from core.errors import ConfigError
from core.formats import FORMATS
from core.hub import check_model_ref, check_ref, existing_path, hub_offline, is_hub
from core.logs import rank
from train import levers
from train.hub_push import check_push_access
from train.levers import LigerChoice, parse_liger_setting
from train.trackers import check_installed, parse_report_to

DEEPSPEED_DIR = CONFIG_DIR / "deepspeed"
log = logging.getLogger(__name__)


class AttnImpl(str, Enum):
    """`auto` picks the fastest exact kernel this machine has (train/attention.py: `choose_attention`)."""

    auto = "auto"  # FA3/FA2 when installed, else varlen for packed rows on CUDA (bf16/fp16), else sdpa
    varlen = "varlen"  # packed rows: PyTorch's flash varlen kernel on CUDA, a per-document reference on CPU
    flash_attention_2 = "flash_attention_2"  # needs the flash-attn package
    flash_attention_3 = "flash_attention_3"  # needs flash-attn 3 (flash_attn_interface), Hopper
    sdpa = "sdpa"  # packed rows get a block-diagonal 4D mask: the whole row's square is computed
    eager = "eager"


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


class Optim(str, Enum):
    """transformers' optimizer names a recipe may pick; the bitsandbytes ones need the [qlora] extra."""

    adamw_torch = "adamw_torch"
    adamw_torch_fused = "adamw_torch_fused"
    adamw_8bit = "adamw_8bit"
    paged_adamw_8bit = "paged_adamw_8bit"
    paged_adamw_32bit = "paged_adamw_32bit"


BNB_OPTIMS = (Optim.adamw_8bit, Optim.paged_adamw_8bit, Optim.paged_adamw_32bit)
QLORA_EXTRA = "install the [qlora] extra (pip install -e '.[qlora]', which brings bitsandbytes)"


class QuantType(str, Enum):
    nf4 = "nf4"  # 4-bit NormalFloat, the QLoRA paper's data type for normally distributed weights
    fp4 = "fp4"


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
class RecipeModelConfig(ModelConfig):
    """The model to fine-tune: `path` (hub id or folder, at `revision`) or one built from `tiny`."""

    revision: str | None = None
    tiny: TinyModelConfig | None = None

    def validate(self) -> None:
        if (self.path is None) == (self.tiny is None):
            raise ConfigError(
                "recipe.model: set exactly one of recipe.model.path (hub id or folder) "
                "and recipe.model.tiny (a model built from a config)"
            )


ALL_LINEAR = "all-linear"


@dataclass
class LoraConfig:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    # module names, or [all-linear]: every linear layer but the output head (peft's shorthand)
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    merge: bool = False  # also write the merged full model to DIR/final (adapter goes to DIR/final-adapter)

    def validate(self) -> None:
        if ALL_LINEAR in self.target_modules and len(self.target_modules) > 1:
            raise ConfigError(
                f"recipe.lora.target_modules={list(self.target_modules)}: {ALL_LINEAR} already names every "
                "linear layer; write [all-linear] alone or list the modules"
            )

    def peft_target_modules(self) -> list[str] | str:
        """What peft's `target_modules` takes: its "all-linear" shorthand is a string, not a list."""
        return ALL_LINEAR if list(self.target_modules) == [ALL_LINEAR] else list(self.target_modules)

    def peft_config(self) -> Any:
        """peft's `LoraConfig` for a causal LM (what the trl trainers take as `peft_config`)."""
        from peft import LoraConfig as PeftLoraConfig

        return PeftLoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=self.peft_target_modules(),
            task_type="CAUSAL_LM",
        )


@dataclass
class QuantizationConfig:
    """QLoRA: the frozen base loaded in 4 bits by bitsandbytes; LoRA adapters train on top of it."""

    quant_type: QuantType = QuantType.nf4
    double_quant: bool = True  # quantise the quantisation constants too (~0.37 bit/parameter saved)
    compute_dtype: DType = DType.bf16  # the matmuls dequantise to this dtype


@dataclass
class RecipeConfig:
    name: str = "tiny"
    model: RecipeModelConfig = field(default_factory=RecipeModelConfig)
    attn_implementation: AttnImpl = AttnImpl.auto
    dtype: DType = DType.fp32
    # Speed levers (docs/performance.md): activation checkpointing, of every n-th decoder layer only when
    # gradient_checkpointing_every > 1; Liger's RMSNorm, RoPE and SwiGLU kernels (pip install liger-kernel,
    # CUDA); torch.compile of each decoder layer.
    gradient_checkpointing: bool = False
    gradient_checkpointing_every: int = 1
    # auto | true | false (Any: Hydra hands `true` over as a bool); auto is settled as training starts
    # (train/levers.py): on where liger-kernel is importable and CUDA is available
    liger_kernels: Any = False
    compile_layers: bool = False
    compile_with_liger: bool = False  # run compile_layers with Liger although it measured slower
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
    quantization: QuantizationConfig | None = None
    optim: Optim = Optim.adamw_torch_fused  # transformers' default on torch >= 2.8
    wandb: WandbConfig = field(default_factory=WandbConfig)

    def validate(self) -> None:
        self.model.validate()
        self.liger_kernels = parse_liger_setting(self.liger_kernels)
        if self.lora is not None:
            self.lora.validate()
        if self.quantization is not None:
            if self.lora is None:
                raise ConfigError(
                    "recipe.quantization trains LoRA adapters on a frozen 4-bit base: set recipe.lora "
                    "(e.g. recipe=editcoder-6.7b-qlora) or remove recipe.quantization"
                )
            if self.model.tiny is not None:
                raise ConfigError(
                    "recipe.quantization loads a checkpoint in 4 bits; a model built from recipe.model.tiny "
                    "has none: save one and set recipe.model.path to it"
                )
        if self.prompt_format not in FORMATS:
            raise ConfigError(
                f"recipe.prompt_format={self.prompt_format!r} is unknown; choose one of {sorted(FORMATS)}"
            )
        for key in ("max_length", "per_device_batch_size", "grad_accum", "gradient_checkpointing_every"):
            if getattr(self, key) < 1:
                raise ConfigError(f"recipe.{key} must be >= 1, got {getattr(self, key)}")
        if self.gradient_checkpointing_every > 1 and not self.gradient_checkpointing:
            raise ConfigError(
                f"recipe.gradient_checkpointing_every={self.gradient_checkpointing_every} picks the layers to "
                "checkpoint: set recipe.gradient_checkpointing=true too, or leave _every at 1"
            )
        if self.attn_implementation == AttnImpl.varlen and not self.packing:
            raise ConfigError(
                "recipe.attn_implementation=varlen takes packed, padding-free rows: set recipe.packing=true, "
                "or use auto or sdpa for padded batches"
            )
        if self.lr <= 0:
            raise ConfigError(f"recipe.lr must be > 0, got {self.lr}")


@dataclass
class DatasetSpec:
    """One dataset of a mix: `hub:ID` (a hub dataset), or a local jsonl/parquet file or folder."""

    path: str | None = None  # hub:ID, or a path that must exist
    subset: str | None = None  # hub config name (e.g. "python" for bigcode/commitpackft)
    split: str = "train"
    weight: float = 1.0  # row multiplier: 0.5 takes half the rows, 2.0 repeats them twice
    columns: dict[str, str] = field(default_factory=dict)  # source column -> contract column
    synthetic: int | None = None  # generate this many synthetic edits instead of loading
    # which toy family (train/synthetic_edits.py): edits, or tasks (the tiny RL recipe's, with tests)
    synthetic_family: str = "edits"

    def validate(self) -> None:
        if (self.path is None) == (self.synthetic is None):
            raise ConfigError("data.datasets[]: set exactly one of `path` and `synthetic`")
        if self.synthetic_family not in ("edits", "tasks"):
            raise ConfigError(f"data.datasets[].synthetic_family={self.synthetic_family!r}: edits or tasks")
        if self.weight <= 0:
            raise ConfigError(f"data.datasets[].weight must be > 0, got {self.weight} for {self.path}")
        if self.path is not None:
            check_ref(self.path, "data.path")


@dataclass
class DataConfig:
    path: str | None = None  # one dataset (hub:ID or a path); replaces `datasets` when set
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
    # What transformers' report_to takes: a tracker (wandb, tensorboard, mlflow, ...), a list or a
    # comma-separated string of them, all (every one installed) or none. Any: a name or a list.
    report_to: Any = "wandb"
    push_to_hub: bool = False  # upload DIR/final (model and card) to run.hub_model_id at the end, from rank 0
    hub_model_id: str | None = None  # the hub repo, "name" (the token's user) or "org/name"
    hub_private_repo: bool | None = None  # None: the hub's default for the namespace
    peak_tflops: float | None = None  # per device, for MFU; detected on known GPUs
    dataset_num_proc: int | None = None
    dataloader_num_workers: int = 0

    def validate(self, wandb: bool = True) -> None:
        """`wandb`: the recipe's own switch; either one off turns wandb off, other trackers stay."""
        self.report_to = parse_report_to(self.report_to)
        if not wandb:
            self.report_to = [name for name in self.report_to if name != "wandb"]
        if self.push_to_hub and not self.hub_model_id:
            raise ConfigError("run.push_to_hub=true needs run.hub_model_id=NAME or ORG/NAME (the hub repo)")
        if self.hub_model_id is not None and not re.fullmatch(r"([\w.-]+/)?[\w.-]+", self.hub_model_id):
            raise ConfigError(f"run.hub_model_id={self.hub_model_id!r}: write NAME or ORG/NAME")
        if self.resume not in ("auto", "never") and not Path(self.resume).is_dir():
            raise ConfigError(
                f"run.resume={self.resume!r}: use auto, never, or an existing checkpoint folder"
            )


@dataclass
class SFTAppConfig:
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    data: DataConfig = field(default_factory=DataConfig)
    run: RunConfig = field(default_factory=RunConfig)
    deepspeed_config: str | None = None  # zero2 | zero3 | zero3-large | zero3-offload, or a json path

    def validate(self) -> None:
        self.recipe.validate()
        self.data.validate()
        for spec in self.data.specs():
            spec.validate()
        self.run.validate(self.recipe.wandb.enabled)
        if self.deepspeed_config is not None:
            deepspeed_config_path(self.deepspeed_config)  # raises when missing
            if self.recipe.compile_layers and zero_stage(self.deepspeed_config) == 3:
                raise ConfigError(
                    "recipe.compile_layers=true would trace ZeRO-3's parameter gathering hooks inside each "
                    "layer: compile under DDP or deepspeed=zero2, or set recipe.compile_layers=false"
                )
            if self.recipe.quantization is not None:
                raise ConfigError(
                    "recipe.quantization (QLoRA) runs without DeepSpeed, on one GPU or one per rank "
                    "under torchrun: set deepspeed=none"
                )
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


def to_app_config(cfg: Any) -> SFTAppConfig:
    return to_validated(cfg, SFTAppConfig)


def preflight(app: SFTAppConfig) -> None:
    """Checks of this machine that need no heavy import: packages, data paths, the hub."""
    recipe = app.recipe
    if importlib.util.find_spec("bitsandbytes") is None:
        if recipe.quantization is not None:
            raise ConfigError(
                f"recipe.quantization loads the base in 4 bits with bitsandbytes: {QLORA_EXTRA}"
            )
        if recipe.optim in BNB_OPTIMS:
            raise ConfigError(f"recipe.optim={recipe.optim.value} is a bitsandbytes optimizer: {QLORA_EXTRA}")
    check_installed(app.run.report_to)
    if app.run.push_to_hub and rank() == 0:  # the rank that pushes; whoami is rate-limited per token
        check_push_access(app.run.hub_model_id)
    flash_packages = {
        AttnImpl.flash_attention_2: ("flash_attn", "the flash-attn package (pip install 'editforge[gpu]')"),
        AttnImpl.flash_attention_3: (
            "flash_attn_interface",
            "flash-attn 3 (built from flash-attn's hopper/)",
        ),
    }
    if recipe.attn_implementation in flash_packages:
        module, package = flash_packages[recipe.attn_implementation]
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"recipe.attn_implementation={recipe.attn_implementation.value} needs CUDA and {package}; "
                "leave it at auto (PyTorch's varlen kernel on CUDA), or use recipe.attn_implementation=sdpa"
            )
    check_liger(recipe)
    if recipe.model.path is not None:
        check_model_ref(recipe.model.path, "recipe.model.path")
    key = "data.path" if app.data.path is not None else "data.datasets[].path"
    for spec in app.data.specs():
        if spec.path is None:
            continue
        if is_hub(spec.path):
            hub_offline()  # decided now, before datasets is imported: no retry storm offline
        else:
            existing_path(
                spec.path,
                key,
                f"build it with `python -m data_pipeline.build ... out={spec.path}` or fix the path",
            )


def check_liger(recipe: RecipeConfig) -> LigerChoice:
    """What `recipe.liger_kernels` means on this machine, refusing what cannot run or measured slower."""
    choice = levers.resolve_liger(recipe.liger_kernels)
    if choice.enabled and recipe.compile_layers and not recipe.compile_with_liger:
        raise ConfigError(
            f"recipe.compile_layers=true with Liger's kernels on ({choice.source()}) "
            f"was {levers.COMPILE_WITH_LIGER_MEASURED}: set recipe.compile_layers=false (Liger alone is "
            "faster) or recipe.liger_kernels=false, or recipe.compile_with_liger=true to run both anyway"
        )
    if choice.enabled and not levers.liger_installed():
        raise ConfigError(
            "recipe.liger_kernels=true needs the liger-kernel package and CUDA (pip install liger-kernel, "
            "or the [gpu] extra); or set recipe.liger_kernels=false (or auto: on where it is installed)"
        )
    return choice


def settle_liger(recipe: RecipeConfig) -> LigerChoice:
    """Replace `auto` by the bool this run uses and log the choice with its reason in one line.

    Called as training starts, after preflight: a refusal stays the only line a user error prints."""
    choice = check_liger(recipe)
    recipe.liger_kernels = choice.enabled
    log.info(choice.log_line())
    return choice


register_schema("sft_schema", SFTAppConfig)
