"""Which model answers, in which prompt format, through which backend: the one resolution shared by
`eval.run` and the editing study (`eval.apiupdate_edit`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from core.formats import PromptFormat, get_format
from core.hub import check_model_ref, existing_path
from core.layout import TrainedConfig
from core.openai_client import EndpointConfig
from eval.config import BackendConfig, EvalModelConfig
from eval.generation import Generator, make_generator


def resolve_format(model: EvalModelConfig, backend: BackendConfig | None = None) -> PromptFormat:
    """The model's prompt format: explicit, else the one it was trained in, else a default (chat for
    a served chat model, EditCoder's otherwise)."""
    if model.prompt_format:
        return get_format(model.prompt_format)
    trained = TrainedConfig.read(model.path) if model.path and model.kind == "model" else None
    if trained is not None:
        return get_format(trained.prompt_format)
    if model.kind == "model" and backend is not None and backend.name == "openai" and backend.chat:
        return get_format("chat")
    return get_format("editcoder")


def check_model(model: EvalModelConfig, backend: BackendConfig) -> None:
    """Before anything heavy loads: the weights or the scripted answers exist."""
    if model.kind == "replay":
        existing_path(model.path or "", "model.path", "model=replay reads a jsonl of scripted completions")
    elif model.kind == "model" and backend.name in ("hf", "vllm"):
        check_model_ref(model.path or "", "model.path")


def backend_options(model: EvalModelConfig, backend: BackendConfig) -> dict[str, Any]:
    """The generator's own settings for `backend`."""
    weights = {"path": model.path, "dtype": model.dtype, "trust_remote_code": model.trust_remote_code}
    if backend.name == "hf":
        return {**weights, "batch_size": backend.batch_size}
    if backend.name == "vllm":
        return {
            **weights,
            "tensor_parallel_size": backend.tensor_parallel_size,
            "gpu_memory_utilization": backend.gpu_memory_utilization,
            "max_model_len": backend.max_model_len,
        }
    endpoint = EndpointConfig(**{f.name: getattr(backend, f.name) for f in fields(EndpointConfig)})
    return {
        "model": model.name,
        "endpoint": endpoint,
        "chat": backend.chat,
        "concurrency": backend.concurrency,
    }


def load_generator(model: EvalModelConfig, backend: BackendConfig, fmt: PromptFormat) -> Generator:
    """The generator `model` names: an oracle, scripted answers, or the weights through `backend`."""
    if model.kind == "model":
        return make_generator(backend.name, fmt, backend_options(model, backend))
    return make_generator(model.kind, fmt, {"path": model.path} if model.kind == "replay" else {})
