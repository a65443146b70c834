"""The run folder training writes and the model folder evaluation reads.

    runs/<recipe>/                 run.output_dir
      checkpoint-N/                trainer checkpoints (resume=auto finds the newest)
      final/                       HF model + tokenizer + editforge_config.yaml
      final-adapter/               LoRA adapter, when recipe.lora.merge=true
      data_stats.json metrics.json wandb_run_id tokenizer-cache/

`editforge_config.yaml` is the resolved training config. Training writes it with
`write_trained_config`; evaluation reads it back with `TrainedConfig.read` to prompt the model
in the format it was trained in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError

FINAL_DIR = "final"
ADAPTER_DIR = "final-adapter"
CONFIG_FILE = "editforge_config.yaml"
DATA_STATS_FILE = "data_stats.json"
METRICS_FILE = "metrics.json"
WANDB_ID_FILE = "wandb_run_id"
TOKENIZER_CACHE_DIR = "tokenizer-cache"


@dataclass(frozen=True)
class TrainedConfig:
    """What a trained model folder records about its training."""

    prompt_format: str
    recipe: str | None
    base_model: str | None  # recipe.model.path; None for a model built from a config
    resolved: dict[str, Any]  # the whole resolved config

    @classmethod
    def read(cls, folder: str | Path) -> TrainedConfig | None:
        """The config in `folder`, or None when the folder was not trained here."""
        import yaml

        path = Path(folder) / CONFIG_FILE
        if not path.is_file():
            return None
        resolved = yaml.safe_load(path.read_text()) or {}
        recipe = resolved.get("recipe") or {}
        if "prompt_format" not in recipe:
            raise UserError(f"{path}: no recipe.prompt_format; pass model.prompt_format=NAME")
        return cls(
            prompt_format=recipe["prompt_format"],
            recipe=recipe.get("name"),
            base_model=(recipe.get("model") or {}).get("path"),
            resolved=resolved,
        )


def write_trained_config(folder: Path, resolved: dict[str, Any]) -> Path:
    import yaml

    path = folder / CONFIG_FILE
    path.write_text(yaml.safe_dump(resolved, sort_keys=False))
    return path
