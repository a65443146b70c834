"""Config plumbing shared by the three Hydra apps: where configs live, strict conversion, schemas.

Every app backs its primary config with a dataclass schema (`register_schema`). `to_validated`
turns a composed config into those dataclasses strictly: a key the schema does not know fails,
whether it came from a YAML file, an override, or a `+key=value` override (which Hydra accepts
into a structured config, and `OmegaConf.to_object` would keep as a stray attribute).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from core.errors import ConfigError


class _Validates(Protocol):
    def validate(self) -> None: ...


T = TypeVar("T", bound=_Validates)  # a config schema: a dataclass with `validate()`
D = TypeVar("D")  # any dataclass

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"


@dataclass
class ModelConfig:
    """Which weights to load: a hub model id or a local folder (transformers' convention).

    Training's `recipe.model` and evaluation's `model` extend it with what only they need.
    """

    path: str | None = None
    trust_remote_code: bool = False


def structured(schema: type) -> Any:
    """`OmegaConf.structured(schema)` with every node writable.

    Schemas nest domain dataclasses (`MinHashConfig`, `SandboxLimits`), some frozen. OmegaConf
    makes a frozen dataclass's node read-only, so no override could set it; as a config it is
    a value to fill in, and `to_object` still builds the frozen dataclass (and runs its checks).
    """
    from omegaconf import DictConfig, OmegaConf

    def writable(node: Any) -> None:
        OmegaConf.set_readonly(node, None)
        for key in node.keys() if isinstance(node, DictConfig) else []:
            child = node[key]
            if isinstance(child, DictConfig):
                writable(child)

    cfg = OmegaConf.structured(schema)
    writable(cfg)
    return cfg


def register_schema(name: str, schema: type) -> None:
    """Store `schema` as `name`, the first entry of a primary config's defaults list."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=name, node=structured(schema))


def to_validated(cfg: Any, schema: type[T]) -> T:
    """A composed Hydra config as validated dataclasses of `schema` (runs its `validate`).

    Raises ConfigError naming the key for an unknown key, a wrong type or a bad value.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
        # A fresh schema accepts only its own keys: merging rejects what `+key=...` slipped in.
        parsed = OmegaConf.to_object(OmegaConf.merge(structured(schema), plain))
    except OmegaConfBaseException as err:
        raise ConfigError(describe_config_error(err)) from err
    except ValueError as err:  # a nested domain dataclass rejected its values (__post_init__)
        raise ConfigError(str(err)) from err
    if not isinstance(parsed, schema):
        raise ConfigError(f"the config is not a {schema.__name__} (is its schema the first default?)")
    try:
        parsed.validate()
    except ConfigError:
        raise
    except ValueError as err:  # a domain type's own check: the same error type for every entry point
        raise ConfigError(str(err)) from err
    return parsed


def to_dataclass(schema: type[D], plain: Mapping[str, Any], key: str, owner: str) -> D:
    """`plain` as `schema` strictly, for a group whose schema the config names (a benchmark kind's,
    a backend's, an editor's options): an unknown key, a wrong type or a value the dataclass
    rejects fails as one ConfigError naming `key.field` and, for a typo, every option `owner` has."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    known = {f.name for f in fields(cast(Any, schema))}
    unknown = sorted(set(plain) - known)
    if unknown:
        raise ConfigError(
            f"unknown config key {key}.{unknown[0]} ({owner} has no such option; "
            f"its options: {', '.join(sorted(known)) or 'none'})"
        )
    try:
        # to_object of a structured config of `schema` is an instance of `schema`
        return cast(D, OmegaConf.to_object(OmegaConf.merge(structured(schema), dict(plain))))
    except OmegaConfBaseException as err:
        detail = describe_config_error(err)  # "field: what" when OmegaConf names the field
        raise ConfigError(
            f"{key}.{detail}" if getattr(err, "full_key", None) else f"{key}: {detail}"
        ) from err
    except ValueError as err:  # the dataclass's own check (__post_init__), ConfigError included
        raise ConfigError(str(err) if str(err).startswith(key) else f"{key}: {err}") from err


def describe_config_error(err: Exception) -> str:
    """One line for an OmegaConf error: the full key, what was wrong, what to do."""
    msg = str(getattr(err, "msg", None) or err).strip().splitlines()[0]
    key = getattr(err, "full_key", None)
    unknown = re.fullmatch(r"Key '[^']+' not in '([^']+)'", msg)
    if unknown and key:
        return (
            f"unknown config key {key} ({unknown.group(1)} has no such field); "
            "check its spelling (`--cfg job` prints every key)"
        )
    if re.fullmatch(r"Key '[^']+' is not in struct", msg) and key:
        # a mapping composed from YAML (an editor's options): Hydra wants `+` for a key it lacks
        return (
            f"unknown config key {key}: check its spelling, or write +{key}=... to add it "
            "(`--cfg job` prints every key)"
        )
    return f"{key}: {msg}" if key else msg


WANDB_MODES = ("online", "offline", "disabled")


@dataclass
class WandbConfig:
    """Where an app's metrics go in W&B: train's `recipe.wandb` and eval's `wandb`.

    The defaults are training's (logging on); eval's config turns it off and names its own project.
    """

    enabled: bool = True
    project: str = "editforge"
    tags: list[str] = field(default_factory=list)
    mode: str | None = None  # online | offline | disabled; None: offline when no API key is set

    def __post_init__(self) -> None:
        # A typo here would otherwise surface only in wandb.init, after the model has loaded.
        if self.mode is not None and self.mode not in WANDB_MODES:
            raise ValueError(f"wandb.mode={self.mode!r}: choose one of {WANDB_MODES}, or null for automatic")


def wandb_has_key() -> bool:
    """True when a W&B API key is configured (env or netrc), i.e. online logging can work."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    import netrc

    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (FileNotFoundError, netrc.NetrcParseError):
        return False
    return bool(auth and auth[2])


def group_options(*groups: str) -> str:
    """Help text: each config group of an app and its options (the `${editforge_groups:...}` resolver)."""
    lines = []
    for group in groups:
        options = sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))
        lines.append(f"  {group}: {', '.join(options)}")
    return "\n".join(lines)


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("editforge_groups"):
        OmegaConf.register_new_resolver("editforge_groups", group_options)
