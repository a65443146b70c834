"""Benchmark kinds for evaluation: the platform's one registry (`core.benchmarks.KINDS`) seen
from here (see `base.py` for the evaluation contract).

A built-in kind's evaluation module (`eval/benchmarks/<name>.py`, its `KIND`) is imported on the
kind's first lookup; its options are known from the registry before that. Kinds that installed
packages declare under the entry-point group `editforge.benchmarks` (`name = "pkg.module:KIND"`)
are registered with the schemas; code can also call `register(Kind())` itself (a test does).
Registering also stores the kind's options as the structured config `benchmark/<name>_options`,
which `configs/benchmark/<name>.yaml` extends; a kind without such a YAML is selectable as
`benchmark=<name>` with its options' defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import core.benchmarks
from core.benchmarks import ENTRY_POINTS, KINDS, discover, kind_of
from core.benchmarks.options import BenchmarkOptions, to_options
from core.config import CONFIG_DIR, structured
from core.errors import ConfigError
from eval.benchmarks.base import BenchmarkKind

__all__ = ["ENTRY_POINTS", "BenchmarkKind", "get_kind", "names", "options_of", "register", "register_schemas"]


def _store_options(name: str, options: type[BenchmarkOptions]) -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(group="benchmark", name=f"{name}_options", node=structured(options))
    if not (CONFIG_DIR / "benchmark" / f"{name}.yaml").is_file():
        store.store(group="benchmark", name=name, node=structured(options))


def register(kind: BenchmarkKind) -> BenchmarkKind:
    """Register `kind` in the platform's registry (decontamination sees it too) and its options
    as the `benchmark` group's schema."""
    core.benchmarks.register(kind)
    _store_options(kind.name, kind.options)
    return kind


def register_schemas() -> None:
    """Every registered kind's options as configs, before Hydra composes: the built-in kinds' (their
    evaluation modules load only when used) and the kinds installed packages declare."""
    discover()
    for kind in KINDS.values():
        _store_options(kind.name, kind.options)


def get_kind(name: str, key: str = "benchmark") -> BenchmarkKind:
    """The evaluation of the kind `name`: a built-in's module is imported on first use."""
    kind = kind_of(name, key)
    if kind.evaluation is None:
        evaluation = importlib.import_module(f"eval.benchmarks.{name}").KIND
        if not isinstance(evaluation, BenchmarkKind) or evaluation.name != name:
            raise ConfigError(f"eval/benchmarks/{name}.py: KIND is not a BenchmarkKind named {name!r}")
        kind.evaluation = evaluation
    return kind.evaluation


def names() -> tuple[str, ...]:
    discover()
    return tuple(KINDS)


def options_of(value: Mapping[str, Any] | BenchmarkOptions, key: str = "benchmark") -> BenchmarkOptions:
    """A config's `benchmark` node as the options of the kind it names, strictly."""
    if isinstance(value, BenchmarkOptions):
        value.validate(key)
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping of options ({key}=NAME picks a kind)")
    return to_options(kind_of(str(value.get("name", "fixtures")), key).options, value, key)
