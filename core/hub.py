"""Dataset references: `hub:ID` names a Hugging Face Hub dataset, anything else is a local path.

A path that does not exist is an error at start-up, never a hub lookup (a typo used to cost
five retries and a ConnectionError). Before a hub dataset is loaded, `hub_offline()` decides
once whether the hub can be reached: `HF_HUB_OFFLINE=1`, or no connection within two seconds,
switches the libraries to their cache (set before they are imported), so there is no retry storm.
"""

from __future__ import annotations

import logging
import os
import socket
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from core.errors import ConfigError, UserError

HUB_PREFIX = "hub:"
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
log = logging.getLogger(__name__)


def is_hub(ref: str) -> bool:
    return ref.startswith(HUB_PREFIX)


def hub_id(ref: str) -> str:
    """`hub:ID` -> ID (`hub:bigcode/humanevalpack` -> `bigcode/humanevalpack`)."""
    return ref.removeprefix(HUB_PREFIX)


def check_ref(ref: str, key: str) -> None:
    """Pure syntax check (no file system): a `hub:` reference must name a dataset."""
    if is_hub(ref) and not hub_id(ref).strip():
        raise ConfigError(f"{key}={ref!r}: name the hub dataset after 'hub:', e.g. hub:nuprl/EditPackFT")


def existing_path(ref: str, key: str, hint: str = "") -> Path:
    """The local path `ref`, which must exist; the error names the key, the path and the fix."""
    path = Path(ref).expanduser()
    if not path.exists():
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
        fix = f"{hint}; " if hint else ""
        raise ConfigError(
            f"{key}={ref!r}: no such file or folder{where}; {fix}write hub:{ref} for a hub dataset"
        )
    return path


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def offline_switch() -> str | None:
    """The environment variable that switches the hub off (HF_HUB_OFFLINE=1, ...), if one does."""
    return next((name for name in OFFLINE_ENVS if _truthy(name)), None)


def unreachable_endpoint(timeout_s: float = 2.0) -> str | None:
    """The hub's address (or the proxy's) when no connection opens within `timeout_s`; else None."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    url = urlparse(proxy or endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout_s).close()
        return None
    except OSError:
        return proxy or endpoint


@cache
def hub_offline(timeout_s: float = 2.0) -> bool:
    """True when the hub cannot be used: offline requested, or its host unreachable.

    When unreachable, sets HF_HUB_OFFLINE/HF_DATASETS_OFFLINE, so libraries imported afterwards
    read their cache instead of retrying.
    """
    if offline_switch() is not None:
        return True
    address = unreachable_endpoint(timeout_s)
    if address is None:
        return False
    log.info("the hub (%s) is unreachable: reading the local cache only", urlparse(address).hostname)
    for name in OFFLINE_ENVS:
        os.environ[name] = "1"
    return True


def load_hub_dataset(ref: str, subset: str | None, split: str, key: str, streaming: bool = False) -> Any:
    """`datasets.load_dataset` for a hub reference, with one-line errors when offline or missing."""
    name = hub_id(ref)
    offline = hub_offline()
    import datasets

    if offline and not datasets.config.HF_HUB_OFFLINE:
        # datasets was imported before the hub was found unreachable: it would retry; say so now.
        raise UserError(f"{key}: the hub is unreachable for {name}; download the dataset and pass its path")
    try:
        return datasets.load_dataset(name, subset, split=split, streaming=streaming)
    except Exception as err:  # not cached offline, gated, renamed, no such split
        raise _cannot_load(name, subset, key, offline, err) from err


def check_hub_dataset(ref: str, subset: str | None, key: str) -> None:
    """Offline, a hub dataset the cache does not hold is one UserError now, before a job creates its
    output folder; online, loading it later says what went wrong."""
    if not hub_offline():
        return
    import datasets

    try:
        datasets.load_dataset_builder(hub_id(ref), subset)
    except Exception as err:  # any failure offline means it cannot load
        raise _cannot_load(hub_id(ref), subset, key, True, err) from err


def _cannot_load(name: str, subset: str | None, key: str, offline: bool, err: Exception) -> UserError:
    reason = "not in the local cache and the hub is offline" if offline else type(err).__name__
    detail = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return UserError(
        f"{key}: cannot load hub dataset {name}"
        + (f" [{subset}]" if subset else "")
        + f" ({reason}: {detail[:200]}); download it and pass a local path instead"
    )


def check_model_ref(ref: str, key: str) -> None:
    """A model reference that can load: a local folder that exists, or a hub id (org/name) that the
    hub serves or, offline, the cache holds; else one ConfigError naming the key and the fix."""
    path = Path(ref).expanduser()
    looks_local = ref.startswith((".", "/", "~")) or ref.count("/") != 1 or path.exists()
    if looks_local:
        if not path.exists():
            where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
            raise ConfigError(
                f"{key}={ref!r}: no such folder{where}; give a model folder or a hub id (org/name)"
            )
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"{key}={ref!r} holds no config.json, so it is no transformers model folder; give the "
                "folder training wrote (runs/<name>/final) or a hub id (org/name)"
            )
        return
    if hub_offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(ref, "config.json"), str):
            raise ConfigError(
                f"{key}={ref!r} is no local folder, and the hub is offline with no cached copy of it; "
                "give a model folder, or download it while online"
            )
