"""Which model answers, in which prompt format, through which backend: the one resolution shared by
`eval.run` and the editing study (`eval.apiupdate_edit`)."""

from __future__ import annotations

from core.formats import PromptFormat, get_format
from core.hub import existing_path
from core.layout import TrainedConfig
from eval.config import EvalModelConfig
from eval.generation import Generator, oracle_generator
from eval.generation.backends import BackendOptions, get_backend


def resolve_format(model: EvalModelConfig, backend: BackendOptions | None = None) -> PromptFormat:
    """The model's prompt format: explicit, else the one it was trained in, else the backend's
    default (chat for a served chat model), else EditCoder's."""
    if model.prompt_format:
        return get_format(model.prompt_format)
    trained = TrainedConfig.read(model.path) if model.path and model.kind == "model" else None
    if trained is not None:
        return get_format(trained.prompt_format)
    default = get_backend(backend.name).default_format(backend) if model.kind == "model" and backend else None
    return get_format(default or "editcoder")


def check_model(model: EvalModelConfig, backend: BackendOptions) -> None:
    """Before anything heavy loads: the weights (as the backend needs them) or the scripted answers exist."""
    if model.kind == "replay":
        existing_path(model.path or "", "model.path", "model=replay reads a jsonl of scripted completions")
    elif model.kind == "model":
        get_backend(backend.name).check(model, backend)


def load_generator(model: EvalModelConfig, backend: BackendOptions, fmt: PromptFormat) -> Generator:
    """The generator `model` names: an oracle, scripted answers, or the weights through `backend`."""
    if model.kind == "model":
        return get_backend(backend.name).make(model, backend, fmt)
    return oracle_generator(model.kind, fmt, model.path)
