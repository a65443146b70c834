"""Structured configs of `python -m eval.run` (groups: benchmark, model, backend).

The schema nests the domain types it configures: `benchmark` is core's `BenchmarkSource`
(the loader decontamination uses too) plus what to score, `model` core's `ModelConfig` plus
how to prompt it, and `sandbox.limits` the sandbox's own `SandboxLimits`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.benchmarks import BenchmarkSource
from core.config import ModelConfig, register_schema
from core.errors import ConfigError
from core.formats import FORMATS
from core.sandbox.limits import SandboxLimits

STAGES = ("generate", "execute", "score", "all")
MODEL_KINDS = ("model", "reference", "identity", "replay")
BACKENDS = ("hf", "vllm", "openai")


@dataclass
class BenchmarkConfig(BenchmarkSource):
    splits: list[str] | None = None  # score only these splits
    limit: int | None = None  # the first N problems (quick runs)


@dataclass
class EvalModelConfig(ModelConfig):
    """`path` (hf, vllm) or `name` (openai); the oracles (reference, identity) need neither."""

    name: str = "model"  # label in reports; the served model's name for backend=openai
    kind: str = "model"  # model | reference | identity (oracles) | replay (path: scripted jsonl)
    # editcoder | starcoder | octocoder | chat; None: the format the model was trained in
    prompt_format: str | None = None
    dtype: str = "auto"


@dataclass
class BackendConfig:
    name: str = "hf"  # hf | vllm | openai
    batch_size: int = 8
    base_url: str = "https://api.openai.com/v1"  # openai
    chat: bool = True  # openai: chat/completions (True) or completions
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    max_retries: int = 6
    backoff_s: float = 1.0
    timeout_s: float = 120.0
    tensor_parallel_size: int = 1  # vllm
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None


@dataclass
class GenConfig:
    """Sampling as the CanItEdit paper: 20 samples, temperature 0.2, top-p 0.95, up to 8192 new tokens."""

    n: int = 20
    temperature: float = 0.2
    top_p: float = 0.95
    # hf and vllm give each request at most what its prompt leaves of the model's context
    max_new_tokens: int = 8192
    seed: int = 0


@dataclass
class SandboxConfig:
    backend: str = "auto"  # auto | bwrap | local
    # Per program: 15 s as MultiPL-E's runner that CanItEdit executes with; every limit settable.
    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(timeout_s=15.0))
    coverage_timeout_s: float = 60.0  # per coverage run, as CanItEdit's evaluator_overlay.py
    workers: int | None = None
    max_code_bytes: int = 200_000  # larger completions fail as too_large without running


@dataclass
class ScoreConfig:
    ks: list[int] = field(default_factory=lambda: [1, 5, 10, 20])
    excess_code: bool = True


@dataclass
class WandbConfig:
    enabled: bool = False
    project: str = "editforge-eval"


@dataclass
class EvalConfig:
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    model: EvalModelConfig = field(default_factory=EvalModelConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    gen: GenConfig = field(default_factory=GenConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    out: str = "runs/eval"
    stage: str = "all"

    def validate(self) -> None:
        self.benchmark.validate("benchmark")
        if self.stage not in STAGES:
            raise ConfigError(f"stage={self.stage!r}: choose one of {STAGES}")
        if self.model.kind not in MODEL_KINDS:
            raise ConfigError(f"model.kind={self.model.kind!r}: choose one of {MODEL_KINDS}")
        if self.backend.name not in BACKENDS:
            raise ConfigError(f"backend.name={self.backend.name!r}: choose one of {BACKENDS}")
        if self.model.kind == "model" and self.backend.name in ("hf", "vllm") and not self.model.path:
            raise ConfigError(f"backend={self.backend.name} needs model.path=<hf folder or hub id>")
        if self.model.kind == "replay" and not self.model.path:
            raise ConfigError("model=replay needs model.path=<jsonl of scripted completions>")
        if self.model.prompt_format is not None and self.model.prompt_format not in FORMATS:
            raise ConfigError(
                f"model.prompt_format={self.model.prompt_format!r}: choose one of {sorted(FORMATS)}"
            )
        if self.gen.n < 1:
            raise ConfigError(f"gen.n must be >= 1, got {self.gen.n}")
        if self.gen.max_new_tokens < 1:
            raise ConfigError(f"gen.max_new_tokens must be >= 1, got {self.gen.max_new_tokens}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


register_schema("eval_schema", EvalConfig)
