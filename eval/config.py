"""Structured configs of `python -m eval.run` (groups: benchmark, model, backend).

`benchmark` holds the options of the kind it names (`eval/benchmarks/`), and `backend` those of the
generation backend it names (`eval/generation/backends.py`): each composed group is validated
against its own options dataclass, so an option of another kind or backend is an unknown key.
`model` is core's `ModelConfig` plus how to prompt it, and `sandbox` the one `SandboxConfig` every
tool shares (`core/sandbox/config.py`). What needs the machine (paths, toolchains, the hub) is
checked by `eval.run`'s preflight, so `--cfg job` works without them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.config import ModelConfig, WandbConfig, register_schema
from core.dtypes import check_dtype
from core.errors import ConfigError
from core.formats import FORMATS
from core.sandbox.config import SandboxConfig

STAGES = ("generate", "execute", "score", "all")
MODEL_KINDS = ("model", "reference", "identity", "replay")
COVERAGE_COLLECTORS = ("probes", "coverage.py")


@dataclass
class EvalModelConfig(ModelConfig):
    """`path` (hf, vllm) or `name` (openai); the oracles (reference, identity) need neither."""

    name: str = (
        "model"  # label in reports (default: from `path`, see label()); backend=openai: the served model
    )
    kind: str = "model"  # model | reference | identity (oracles) | replay (path: scripted jsonl)
    # editcoder | starcoder | octocoder | chat; None: the format the model was trained in
    prompt_format: str | None = None
    dtype: str = "auto"

    def label(self) -> str:
        """The name reports and tables use: `name` when set, else the model path's last part (its
        parent's too for a `checkpoint-N` folder, and the parent alone for training's `final`), so
        two models are never both "model"."""
        if self.name != "model" or not self.path:
            return self.name
        parts = [p for p in str(self.path).rstrip("/").replace("\\", "/").split("/") if p]
        if len(parts) >= 2 and parts[-1].startswith(("checkpoint-", "step-", "global_step")):
            return f"{parts[-2]}/{parts[-1]}"
        if len(parts) >= 2 and parts[-1] == "final":  # train/sft.py saves runs/<name>/final
            return parts[-2]
        return parts[-1] if parts else self.name


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
class ScoreConfig:
    ks: list[int] = field(default_factory=lambda: [1, 5, 10, 20])
    excess_code: bool = True
    # How ExcessCode learns which lines ran: "probes" (in the verdict run of samples that run split,
    # a second run under coverage.py's tracer for the others) or "coverage.py" (that second run for
    # every passing sample, as CanItEdit does). Same numbers; probes is several times faster.
    coverage: str = "probes"

    @property
    def measured_in_verdicts(self) -> bool:
        """Whether split samples' verdict runs also measure ExcessCode's lines."""
        return self.excess_code and self.coverage == "probes"


@dataclass
class EvalConfig:
    # The chosen kind's options (a BenchmarkOptions subclass once validated)
    benchmark: Any = field(default_factory=lambda: {"name": "fixtures"})
    model: EvalModelConfig = field(default_factory=EvalModelConfig)
    # The chosen backend's options (a BackendOptions subclass once validated: eval/generation/backends.py)
    backend: Any = field(default_factory=lambda: {"name": "hf"})
    gen: GenConfig = field(default_factory=GenConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    wandb: WandbConfig = field(default_factory=lambda: WandbConfig(enabled=False, project="editforge-eval"))
    out: str = "runs/eval"
    stage: str = "all"

    def validate(self) -> None:
        from eval.benchmarks import options_of
        from eval.generation.backends import backend_options_of

        self.benchmark = options_of(self.benchmark)
        if self.stage not in STAGES:
            raise ConfigError(f"stage={self.stage!r}: choose one of {STAGES}")
        if self.score.coverage not in COVERAGE_COLLECTORS:
            raise ConfigError(f"score.coverage={self.score.coverage!r}: choose one of {COVERAGE_COLLECTORS}")
        if self.model.kind not in MODEL_KINDS:
            raise ConfigError(f"model.kind={self.model.kind!r}: choose one of {MODEL_KINDS}")
        self.backend = backend_options_of(self.backend)
        check_dtype(self.model.dtype, "model.dtype")
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


def register_schemas() -> None:
    """The primary schema and every kind's options (`benchmark/<name>_options`, which the YAMLs extend)."""
    from eval.benchmarks import register_schemas as register_kind_schemas
    from eval.generation.backends import register_schemas as register_backend_schemas

    register_schema("eval_schema", EvalConfig)
    register_kind_schemas()
    register_backend_schemas()


register_schemas()
