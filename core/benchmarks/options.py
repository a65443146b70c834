"""The options every benchmark kind shares, and strict conversion to one kind's options.

Each kind extends `BenchmarkOptions` with its own fields (HumanEvalFix's languages and variant,
the novel-API benchmark's cells, ...). A config names the kind in `name`; `to_options` builds
that kind's dataclass from the rest, so an option of another kind is an unknown key there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar

from core.errors import ConfigError
from core.hub import check_ref, existing_path, hub_offline, is_hub

Opts = TypeVar("Opts", bound="BenchmarkOptions")


@dataclass
class BenchmarkOptions:
    """Which benchmark, read from where, and which part of it to score."""

    name: str = "fixtures"
    path: str | None = None  # None: the kind's default source; hub:ID: the hub; else a local file/folder
    splits: list[str] | None = None  # score only these splits
    limit: int | None = None  # the first N problems of each split (language, instruction kind)

    # A kind whose path has no default names the command that writes its folder.
    built_by: ClassVar[str | None] = None
    # A kind whose default source is the hub (checked for reachability before loading).
    hub_default: ClassVar[bool] = False

    def validate(self, key: str = "benchmark") -> None:
        """Values that are wrong whatever the machine; a missing required path is `check_source`'s."""
        if self.path is not None:
            check_ref(self.path, f"{key}.path")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"{key}.limit must be >= 1 (or null for every problem), got {self.limit}")

    def check_source(self, key: str = "benchmark") -> None:
        """Before loading: the path is given where the kind needs one, a local path exists, and a
        hub source finds out now whether the hub is reachable (so libraries read their cache)."""
        if self.path is None and self.built_by:
            raise ConfigError(f"{key}={self.name} needs {key}.path=<folder written by {self.built_by}>")
        if self.path is not None and not is_hub(self.path):
            existing_path(self.path, f"{key}.path", "leave it null for the default source")
        elif self.path is not None or self.hub_default:
            hub_offline()

    def identity(self) -> dict[str, Any]:
        """What decides which problems and prompts exist (not which are scored: splits, limit)."""
        return {k: v for k, v in asdict(self).items() if k not in ("splits", "limit")}

    def variants(self: Opts) -> list[Opts]:
        """The benchmark as each of its variants shows it (decontamination checks them all)."""
        return [self]


def to_options(schema: type[Opts], plain: Mapping[str, Any], key: str = "benchmark") -> Opts:
    """`plain` as `schema` strictly: an unknown key or a wrong type fails naming `key.field`."""
    from core.config import to_dataclass

    options = to_dataclass(schema, plain, key, owner=f"{key}={plain.get('name')}")
    options.validate(key)
    return options
