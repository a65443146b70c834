"""The registry of benchmark kinds: one name, one `BenchmarkKind` (see `base.py` for the contract).

The built-in kinds are imported from their modules on first lookup, and so are the kinds other
installed packages declare under the entry-point group `editforge.benchmarks` (`name =
"pkg.module:KIND"`); code can also call `register(Kind())` itself (a test does). Registering also stores the kind's
options as the structured config `benchmark/<name>_options`, which `configs/benchmark/<name>.yaml`
extends; a kind without such a YAML is selectable as `benchmark=<name>` with its options' defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from core.benchmarks.options import BenchmarkOptions, to_options
from core.config import CONFIG_DIR, structured
from core.errors import ConfigError
from eval.benchmarks.base import BenchmarkKind

BUILTIN = ("canitedit", "fixtures", "humanevalfix", "apiupdate", "novelapi", "editbench")
_KINDS: dict[str, BenchmarkKind] = {}


def register(kind: BenchmarkKind) -> BenchmarkKind:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(group="benchmark", name=f"{kind.name}_options", node=structured(kind.options))
    if not (CONFIG_DIR / "benchmark" / f"{kind.name}.yaml").is_file():
        store.store(group="benchmark", name=kind.name, node=structured(kind.options))
    _KINDS[kind.name] = kind
    return kind


ENTRY_POINTS = "editforge.benchmarks"


def load_builtin() -> None:
    """The built-in kinds, then those installed packages declare (once each)."""
    for name in BUILTIN:
        if name not in _KINDS:
            register(importlib.import_module(f"eval.benchmarks.{name}").KIND)
    for entry in entry_points(group=ENTRY_POINTS):
        if entry.name not in _KINDS:
            kind = entry.load()
            if not isinstance(kind, BenchmarkKind) or kind.name != entry.name:
                raise ConfigError(
                    f"entry point {entry.name} = {entry.value} is not a BenchmarkKind named {entry.name!r}"
                )
            register(kind)


def get_kind(name: str, key: str = "benchmark") -> BenchmarkKind:
    load_builtin()
    if name not in _KINDS:
        raise ConfigError(f"{key}.name={name!r}: choose one of {names()}")
    return _KINDS[name]


def names() -> tuple[str, ...]:
    load_builtin()
    return tuple(_KINDS)


def options_of(value: Mapping[str, Any] | BenchmarkOptions, key: str = "benchmark") -> BenchmarkOptions:
    """A config's `benchmark` node as the options of the kind it names, strictly."""
    if isinstance(value, BenchmarkOptions):
        value.validate(key)
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping of options ({key}=NAME picks a kind)")
    return to_options(get_kind(str(value.get("name", "fixtures")), key).options, value, key)
