"""The config of `train/rl.py`: an RL recipe (the policy, the algorithm, sampling), the tasks, the
rewards, the sandbox that judges them and the run (SFT's `RunConfig`: output, logging, resume, hub).

Validated strictly and checked against the machine before torch or trl is imported, as SFT's is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.config import WandbConfig, register_schema
from core.errors import ConfigError
from core.formats import FORMATS
from core.hub import check_model_ref, existing_path, is_hub
from core.sandbox.config import SandboxConfig
from train.config import AttnImpl, DType, LoraConfig, RecipeModelConfig, RunConfig, deepspeed_config_path
from train.rl_rewards import RewardConfig
from train.rl_tasks import TasksConfig
from train.trackers import check_installed

# trl's policy losses, chosen by `recipe.algorithm`: GRPOTrainer's loss types, and RLOOTrainer
ALGORITHMS = ("grpo", "dr_grpo", "dapo", "bnpo", "rloo")
GENERATION = ("hf", "vllm_colocate", "vllm_server")


@dataclass
class RLRecipeConfig:
    name: str = "tiny-grpo"
    model: RecipeModelConfig = field(default_factory=RecipeModelConfig)  # an SFT output's final/, or a hub id
    attn_implementation: AttnImpl = AttnImpl.auto
    dtype: DType = DType.fp32
    gradient_checkpointing: bool = False
    prompt_format: str = "editcoder"  # evaluation's format: a model is scored as it was rewarded
    lora: LoraConfig | None = None
    algorithm: str = "grpo"  # grpo | dr_grpo | dapo | bnpo (GRPOTrainer's loss_type) | rloo (RLOOTrainer)
    num_generations: int = 8  # completions per prompt (the group the advantage is taken over)
    max_prompt_length: int = 1024
    max_completion_length: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    beta: float = 0.0  # KL coefficient against the starting policy (0: no reference model kept)
    epsilon: float = 0.2  # the ratio's clip range
    num_iterations: int = 1  # policy updates per generation batch
    lr: float = 1e-6
    lr_scheduler: str = "constant"
    warmup_steps: int = 0
    epochs: float = 1.0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    per_device_batch_size: int = 8  # completions per device per micro-step
    grad_accum: int = 1
    generation: str = "hf"  # hf | vllm_colocate | vllm_server (trl's vLLM integration)
    vllm_server_url: str | None = None  # vllm_server: trl vllm-serve's base URL
    vllm_gpu_memory_utilization: float = 0.3  # vllm_colocate: the share vLLM takes beside training
    wandb: WandbConfig = field(default_factory=lambda: WandbConfig(tags=["rl"]))

    def validate(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"recipe.algorithm={self.algorithm!r}: choose one of {ALGORITHMS}")
        if self.generation not in GENERATION:
            raise ConfigError(f"recipe.generation={self.generation!r}: choose one of {GENERATION}")
        if self.prompt_format not in FORMATS:
            raise ConfigError(f"recipe.prompt_format={self.prompt_format!r}: choose one of {sorted(FORMATS)}")
        if self.num_generations < 2:
            raise ConfigError(
                "recipe.num_generations must be >= 2: the advantage compares a prompt's completions"
            )
        if self.model.path is None or self.model.tiny is not None:
            raise ConfigError(
                "recipe.model.path=<an SFT run's final/ or a hub id> is required: RL starts from a trained "
                "policy (recipe.model.tiny is SFT's; train one with python train/sft.py recipe=tiny)"
            )
        if self.generation == "vllm_server" and not self.vllm_server_url:
            raise ConfigError(
                "recipe.generation=vllm_server needs recipe.vllm_server_url (trl vllm-serve's URL)"
            )


@dataclass
class HackProbeConfig:
    """Tasks whose tests contradict their instruction: any pass there is a hack (`hack_rate`)."""

    path: str | None = None  # a CanItEdit-schema file of such tasks (None: no probe)
    every: int = 0  # log steps between probes (0: at each logging step)


@dataclass
class RLAppConfig:
    recipe: RLRecipeConfig = field(default_factory=RLRecipeConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    probe: HackProbeConfig = field(default_factory=HackProbeConfig)
    run: RunConfig = field(default_factory=RunConfig)
    deepspeed_config: str | None = None  # zero2 | zero3 | zero3-large | zero3-offload, or a json path

    def validate(self) -> None:
        self.recipe.validate()
        self.tasks.validate()
        self.run.validate(self.recipe.wandb.enabled)
        if self.deepspeed_config is not None:
            deepspeed_config_path(self.deepspeed_config)  # raises when missing
        if self.recipe.generation != "hf" and self.recipe.lora is not None and self.deepspeed_config:
            raise ConfigError("vLLM generation with LoRA under DeepSpeed is not supported by trl: pick one")


def preflight(app: RLAppConfig) -> None:
    """Checks of this machine that need no heavy import: packages, paths, the hub."""
    import importlib.util

    check_installed(app.run.report_to)
    if app.recipe.generation != "hf" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            f"recipe.generation={app.recipe.generation} needs vLLM (pip install 'editforge[gpu]'); "
            "or recipe.generation=hf"
        )
    if app.recipe.model.path is not None:
        check_model_ref(app.recipe.model.path, "recipe.model.path")
    if app.probe.path is not None:
        existing_path(app.probe.path, "probe.path", "give a CanItEdit-schema file of probe tasks")
    for i, source in enumerate(app.tasks.sources):
        path = source.get("path") if hasattr(source, "get") else None
        if path and not is_hub(str(path)):
            existing_path(str(path), f"tasks.sources[{i}].path", "give a benchmark-schema file or folder")


register_schema("rl_schema", RLAppConfig)
