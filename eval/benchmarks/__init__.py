"""The registry of benchmark kinds: one name, one `BenchmarkKind` (see `base.py` for the contract).

A built-in kind's module is imported on its first lookup (its options are known from its core
source before that); the kinds other installed packages declare under the entry-point group
`editforge.benchmarks` (`name = "pkg.module:KIND"`) are loaded with the schemas; code can also
call `register(Kind())` itself (a test does). Registering also stores the kind's
options as the structured config `benchmark/<name>_options`, which `configs/benchmark/<name>.yaml`
extends; a kind without such a YAML is selectable as `benchmark=<name>` with its options' defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from core.benchmarks import SOURCES
from core.benchmarks.options import BenchmarkOptions, to_options
from core.config import CONFIG_DIR, structured
from core.errors import ConfigError
from eval.benchmarks.base import BenchmarkKind

BUILTIN = ("canitedit", "fixtures", "humanevalfix", "apiupdate", "novelapi", "editbench")
_KINDS: dict[str, BenchmarkKind] = {}


def _store_options(name: str, options: type[BenchmarkOptions]) -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(group="benchmark", name=f"{name}_options", node=structured(options))
    if not (CONFIG_DIR / "benchmark" / f"{name}.yaml").is_file():
        store.store(group="benchmark", name=name, node=structured(options))


def register(kind: BenchmarkKind) -> BenchmarkKind:
    _store_options(kind.name, kind.options)
    _KINDS[kind.name] = kind
    return kind


ENTRY_POINTS = "editforge.benchmarks"


def register_schemas() -> None:
    """Every kind's options as configs, before Hydra composes: the built-in kinds' from their core
    sources (their modules load only when used), and the kinds installed packages declare."""
    for name in BUILTIN:
        _store_options(name, SOURCES[name].options)
    for entry in entry_points(group=ENTRY_POINTS):
        if entry.name not in _KINDS:
            kind = entry.load()
            if not isinstance(kind, BenchmarkKind) or kind.name != entry.name:
                raise ConfigError(
                    f"entry point {entry.name} = {entry.value} is not a BenchmarkKind named {entry.name!r}"
                )
            register(kind)


def get_kind(name: str, key: str = "benchmark") -> BenchmarkKind:
    if name not in _KINDS and name in BUILTIN:
        register(importlib.import_module(f"eval.benchmarks.{name}").KIND)
    if name not in _KINDS:
        register_schemas()
    if name not in _KINDS:
        raise ConfigError(f"{key}.name={name!r}: choose one of {names()}")
    return _KINDS[name]


def names() -> tuple[str, ...]:
    return tuple(dict.fromkeys([*BUILTIN, *_KINDS]))


def options_of(value: Mapping[str, Any] | BenchmarkOptions, key: str = "benchmark") -> BenchmarkOptions:
    """A config's `benchmark` node as the options of the kind it names, strictly."""
    if isinstance(value, BenchmarkOptions):
        value.validate(key)
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping of options ({key}=NAME picks a kind)")
    return to_options(get_kind(str(value.get("name", "fixtures")), key).options, value, key)
