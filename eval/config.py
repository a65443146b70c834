"""Structured configs of `python -m eval.run` (groups: benchmark, model, backend)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

STAGES = ("generate", "execute", "score", "all")
VARIANTS = ("fix", "fixtests", "fixdocs")  # HumanEvalFix: what the prompt shows besides the buggy code


@dataclass
class BenchmarkConfig:
    name: str = "fixtures"  # canitedit | humanevalfix | fixtures
    path: str | None = (
        None  # local file/folder; None: the hub (canitedit, humanevalfix) or the shipped fixtures
    )
    languages: list[str] = field(default_factory=lambda: ["python"])  # humanevalfix splits
    splits: list[str] | None = None  # score only these splits
    limit: int | None = None  # the first N problems (quick runs)
    variant: str = "fixtests"  # humanevalfix: fix | fixtests | fixdocs (bigcode's standard: fixtests)


@dataclass
class ModelConfig:
    name: str = "model"  # label in reports; the served model's name for backend=openai
    kind: str = "model"  # model | reference | identity (the oracles ignore the backend)
    path: str | None = None  # hub id or folder (hf, vllm)
    prompt_format: str | None = (
        None  # editcoder | starcoder | octocoder | chat; None: from the trained model's config
    )
    dtype: str = "auto"
    trust_remote_code: bool = False


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
    timeout_s: float = 15.0  # per program, as MultiPL-E's runner that CanItEdit executes with
    coverage_timeout_s: float = 60.0  # per coverage run, as CanItEdit's evaluator_overlay.py
    memory_mb: int = 2048
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
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    gen: GenConfig = field(default_factory=GenConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    out: str = "runs/eval"
    stage: str = "all"

    def validate(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"stage={self.stage!r}: choose one of {STAGES}")
        if self.model.kind not in ("model", "reference", "identity"):
            raise ValueError(f"model.kind={self.model.kind!r}: choose model, reference or identity")
        if self.model.kind == "model" and self.backend.name in ("hf", "vllm") and not self.model.path:
            raise ValueError(f"backend={self.backend.name} needs model.path=<hf folder or hub id>")
        if self.gen.n < 1:
            raise ValueError(f"gen.n must be >= 1, got {self.gen.n}")
        if self.gen.max_new_tokens < 1:
            raise ValueError(f"gen.max_new_tokens must be >= 1, got {self.gen.max_new_tokens}")
        if self.benchmark.variant not in VARIANTS:
            raise ValueError(f"benchmark.variant={self.benchmark.variant!r}: choose one of {VARIANTS}")

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


ConfigStore.instance().store(name="eval_schema", node=EvalConfig)
