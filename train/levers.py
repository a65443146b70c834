"""Speed levers a recipe may leave to the machine: which of them this run turns on, and why.

`recipe.liger_kernels` takes `auto`, `true` or `false`. `auto` turns Liger's kernels on where
they can run (the liger-kernel package is importable and CUDA is there), because that measured
fastest (docs/performance.md: 1.49x length-grouped padding at 1.3B on an H100, 1.78x with two
rows per micro-batch); elsewhere it is off. `train/config.py` resolves it in preflight, to refuse
what cannot run or measured slower, and again as training starts (`settle_liger`), where the run
logs the choice and its reason in one line and records the bool that runs.

The machine is asked through `liger_installed` and `cuda_available` only, so a test can stand
for any machine by replacing those two.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError

AUTO = "auto"
_WORDS = {"auto": AUTO, "true": True, "false": False}

# The measurement behind refusing compiled layers together with Liger (docs/performance.md).
COMPILE_WITH_LIGER_MEASURED = (
    "measured slower than Liger alone (42,251 against 49,611-50,745 tokens/s, editcoder-1.3b-fromconfig "
    "on an H100) and inductor fails to compile Liger's RMSNorm Triton kernel"
)


@dataclass(frozen=True)
class LigerChoice:
    """Whether this run applies Liger's kernels, the setting it came from, and the reason."""

    enabled: bool
    setting: bool | str
    reason: str

    def source(self) -> str:
        return f"recipe.liger_kernels={_word(self.setting)}: {self.reason}"

    def log_line(self) -> str:
        return f"liger kernels: {'on' if self.enabled else 'off'} ({self.source()})"


def parse_liger_setting(value: Any) -> bool | str:
    """`recipe.liger_kernels` as True, False or "auto"; Hydra hands `true` over as a bool, `auto` as a str."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _WORDS:
        return _WORDS[value.strip().lower()]
    raise ConfigError(
        f"recipe.liger_kernels={value!r}: choose auto (on where installed with CUDA), true or false"
    )


def liger_installed() -> bool:
    return importlib.util.find_spec("liger_kernel") is not None


def cuda_available() -> bool:
    """A CUDA device this process may use (CUDA_VISIBLE_DEVICES="" hides them all, as tests on CPU do)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x") == "":
        return False
    import torch

    return torch.cuda.is_available()


def resolve_liger(setting: bool | str) -> LigerChoice:
    """What `setting` means on this machine; `true` stays on (preflight reports a missing package)."""
    setting = parse_liger_setting(setting)
    if setting != AUTO:
        return LigerChoice(bool(setting), setting, "set by the recipe")
    if not liger_installed():
        return LigerChoice(
            False, AUTO, "the liger-kernel package is not installed (pip install 'editforge[gpu]')"
        )
    if not cuda_available():  # asked second: the package check needs no torch import
        return LigerChoice(False, AUTO, "liger-kernel is installed but there is no CUDA device")
    return LigerChoice(True, AUTO, "liger-kernel is installed and CUDA is available, the fastest measured")


def _word(setting: bool | str) -> str:
    return setting if isinstance(setting, str) else str(setting).lower()
