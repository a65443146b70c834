"""`run.report_to`: the experiment trackers transformers reports to, checked before anything loads.

transformers accepts one name, a list of names, "all" (every tracker installed) or "none". It
would reject an unknown name or a missing package only when the trainer is built, after the
data and the model have loaded; this module says so at start-up, in one line, without importing
transformers. `tests/train/test_trackers.py` keeps `TRACKERS` equal to transformers' own list.
"""

from __future__ import annotations

import importlib.util
from typing import Any, NamedTuple

from core.errors import ConfigError


class Needs(NamedTuple):
    """A package a tracker's callback imports: `pip` installs it, any of `modules` provides it."""

    pip: str
    modules: tuple[str, ...]


def _needs(pip: str, *modules: str) -> Needs:
    return Needs(pip, modules or (pip,))


# report_to name -> what its transformers callback imports (transformers.integrations.integration_utils)
TRACKERS: dict[str, tuple[Needs, ...]] = {
    "azure_ml": (_needs("azureml-core", "azureml.core"),),
    "clearml": (_needs("clearml"),),
    "codecarbon": (_needs("codecarbon"),),
    "comet_ml": (_needs("comet-ml", "comet_ml"),),
    "dagshub": (_needs("dagshub"), _needs("mlflow")),
    "dvclive": (_needs("dvclive"),),
    "flyte": (_needs("flytekit"), _needs("flytekitplugins-deck", "flytekitplugins.deck")),
    "kubeflow": (),  # reports over HTTP to the URL the Kubeflow controller injects: no package
    "mlflow": (_needs("mlflow"),),
    "neptune": (_needs("neptune"),),
    "swanlab": (_needs("swanlab"),),
    "tensorboard": (_needs("tensorboard", "tensorboard", "tensorboardX"),),
    "trackio": (_needs("trackio"),),
    "wandb": (_needs("wandb"),),
}
ALL, NONE = "all", "none"


def parse_report_to(value: Any) -> list[str]:
    """`run.report_to` as a list of tracker names: [] for "none", ["all"] for "all".

    Accepts a name, a comma-separated string ("wandb,tensorboard") or a list; raises ConfigError
    naming an unknown tracker or a misplaced "all"/"none".
    """
    if isinstance(value, str):
        names = [n.strip() for n in value.split(",") if n.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value):
        names = [n.strip() for n in value]
    else:
        raise ConfigError(f"run.report_to={value!r}: give a tracker name or a list of them")
    if not names:
        raise ConfigError("run.report_to is empty; write run.report_to=none to report nowhere")
    unknown = [n for n in names if n not in TRACKERS and n not in (ALL, NONE)]
    if unknown:
        raise ConfigError(
            f"run.report_to: unknown tracker {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(sorted(TRACKERS))}, or all, or none"
        )
    if len(names) > 1 and {ALL, NONE} & set(names):
        raise ConfigError(f"run.report_to={value!r}: 'all' and 'none' stand alone, not in a list")
    return [] if names == [NONE] else list(dict.fromkeys(names))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def missing_packages(names: list[str]) -> dict[str, list[str]]:
    """Tracker -> the pip packages it needs that this environment lacks (trackers lacking none left out)."""
    missing = {}
    for name in names:
        lacks = [n.pip for n in TRACKERS.get(name, ()) if not any(_importable(m) for m in n.modules)]
        if lacks:
            missing[name] = lacks
    return missing


def check_installed(names: list[str]) -> None:
    """Raise ConfigError naming the package to install when a requested tracker cannot run here."""
    missing = missing_packages(names)
    if missing:
        what = "; ".join(f"{name} needs {' and '.join(pips)}" for name, pips in missing.items())
        packages = " ".join(p for pips in missing.values() for p in pips)
        raise ConfigError(
            f"run.report_to: {what} (not installed); pip install {packages}, or leave "
            f"{', '.join(missing)} out of run.report_to"
        )
