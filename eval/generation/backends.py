"""The registry of generation backends: one name, one registered `Backend`.

A backend declares its own config schema (`options`: a `BackendOptions` subclass, so `backend.X`
is validated against the backend `backend.name` names and another backend's key is an unknown
key), its preflight (`check`: before anything heavy loads), the prompt format it implies when
the model names none (`default_format`), and how it builds its generator (`make`, which imports
the heavy libraries). The runner gets a backend by name and never branches on it.

Built-in: hf (transformers, the CPU fallback), vllm (GPUs) and openai (an OpenAI-compatible
server). Installed packages declare more under the entry-point group `editforge.backends`
(`name = "pkg.module:BACKEND"`); code can also call `register(MyBackend())`. Registering stores the
options as the structured config `backend/<name>_options`, which `configs/backend/<name>.yaml`
extends; a backend without such a YAML is selectable as `backend=<name>` with its defaults.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from core.benchmarks.options import to_options
from core.config import CONFIG_DIR, structured
from core.errors import ConfigError
from core.hub import check_model_ref
from core.openai_client import EndpointConfig
from core.plugins import EntryPoints

if TYPE_CHECKING:
    from core.formats import PromptFormat
    from eval.config import EvalModelConfig
    from eval.generation.base import Generator

ENTRY_POINTS = "editforge.backends"
PLUGINS = EntryPoints(ENTRY_POINTS, "a Backend")


@dataclass
class BackendOptions:
    """What every backend's config has; a backend's options dataclass adds its own keys."""

    name: str = "hf"

    def validate(self, key: str = "backend") -> None:
        """Value checks of the backend's own keys (one-line ConfigError)."""


class Backend(ABC):
    """How a model's weights (or a served model) generate: see the module docstring."""

    name: ClassVar[str]
    options: ClassVar[type[BackendOptions]]

    def check(self, model: EvalModelConfig, options: BackendOptions) -> None:
        """Before anything heavy loads: by default, the weights `model.path` names exist."""
        check_model_ref(model.path or "", "model.path")

    def default_format(self, options: BackendOptions) -> str | None:
        """The prompt format to use when neither the model config nor its training names one."""
        return None

    @abstractmethod
    def make(self, model: EvalModelConfig, options: BackendOptions, fmt: PromptFormat) -> Generator:
        """The generator, loaded (this is where torch, vllm or a client is imported)."""


def _weights(model: EvalModelConfig) -> dict[str, Any]:
    return {"path": model.path, "dtype": model.dtype, "trust_remote_code": model.trust_remote_code}


@dataclass
class HFOptions(BackendOptions):
    name: str = "hf"
    batch_size: int = 8

    def validate(self, key: str = "backend") -> None:
        if self.batch_size < 1:
            raise ConfigError(f"{key}.batch_size must be >= 1, got {self.batch_size}")


class HF(Backend):
    name = "hf"
    options = HFOptions

    def make(self, model: EvalModelConfig, options: HFOptions, fmt: PromptFormat) -> Generator:  # type: ignore[override]
        from eval.generation.hf import HFGenerator

        return HFGenerator(**_weights(model), batch_size=options.batch_size)


@dataclass
class VLLMOptions(BackendOptions):
    name: str = "vllm"
    batch_size: int = 256  # prompts per generate call: bounds what a crash can lose
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None

    def validate(self, key: str = "backend") -> None:
        if self.batch_size < 1 or self.tensor_parallel_size < 1:
            raise ConfigError(f"{key}.batch_size and {key}.tensor_parallel_size must be >= 1")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"{key}.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )


class VLLM(Backend):
    name = "vllm"
    options = VLLMOptions

    def make(self, model: EvalModelConfig, options: VLLMOptions, fmt: PromptFormat) -> Generator:  # type: ignore[override]
        from eval.generation.vllm import VLLMGenerator

        settings = asdict(options)
        settings.pop("name")
        return VLLMGenerator(**_weights(model), **settings)


@dataclass
class OpenAIOptions(EndpointConfig, BackendOptions):
    """An OpenAI-compatible endpoint (`backend.base_url`, ...; the key from `api_key_env`)."""

    name: str = "openai"
    chat: bool = True  # chat/completions (True) or completions
    concurrency: int = 8  # requests in flight

    def validate(self, key: str = "backend") -> None:
        if self.concurrency < 1:
            raise ConfigError(f"{key}.concurrency must be >= 1, got {self.concurrency}")


class OpenAI(Backend):
    name = "openai"
    options = OpenAIOptions

    def check(self, model: EvalModelConfig, options: BackendOptions) -> None:
        """The served model is named by `model.name`; nothing local to check."""

    def default_format(self, options: OpenAIOptions) -> str | None:  # type: ignore[override]
        return "chat" if options.chat else None

    def make(self, model: EvalModelConfig, options: OpenAIOptions, fmt: PromptFormat) -> Generator:  # type: ignore[override]
        from eval.generation.openai import OpenAIGenerator

        endpoint = EndpointConfig(**{k: getattr(options, k) for k in EndpointConfig.__dataclass_fields__})
        return OpenAIGenerator(model.name, endpoint, chat=options.chat, concurrency=options.concurrency)


BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (HF(), VLLM(), OpenAI())}


def _store_options(backend: Backend) -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(group="backend", name=f"{backend.name}_options", node=structured(backend.options))
    if not (CONFIG_DIR / "backend" / f"{backend.name}.yaml").is_file():
        store.store(group="backend", name=backend.name, node=structured(backend.options))


def register(backend: Backend) -> Backend:
    """Register `backend` (replacing one of the same name) and its options as the group's schema."""
    if not isinstance(backend, Backend) or not issubclass(backend.options, BackendOptions):
        raise ConfigError(f"{backend!r} is not a Backend with BackendOptions options")
    BACKENDS[backend.name] = backend
    _store_options(backend)
    return backend


def discover() -> None:
    """Register the backends installed packages declare (once per process)."""
    PLUGINS.load(register)


def register_schemas() -> None:
    """Every backend's options as configs, before Hydra composes."""
    discover()
    for backend in BACKENDS.values():
        _store_options(backend)


def get_backend(name: str, key: str = "backend") -> Backend:
    if name not in BACKENDS:
        discover()
    if name not in BACKENDS:
        raise ConfigError(f"{key}.name={name!r}: choose one of {tuple(BACKENDS)}")
    return BACKENDS[name]


def backend_options_of(value: Mapping[str, Any] | BackendOptions, key: str = "backend") -> BackendOptions:
    """A config's `backend` node as the options of the backend it names, strictly."""
    if isinstance(value, BackendOptions):
        value.validate(key)
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping of options ({key}=NAME picks a backend)")
    return to_options(get_backend(str(value.get("name", "hf")), key).options, value, key)
