"""Supervised fine-tuning of code-edit models.

torchrun --nproc_per_node 8 train/sft.py recipe=editcoder-6.7b
python train/sft.py recipe=tiny run.output_dir=runs/tiny
python train/sft.py recipe=editcoder-6.7b --cfg job      # print the resolved config
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the repo's packages, not train/'s modules
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from train.config import CONFIG_DIR, to_app_config  # noqa: E402
from train.logs import setup_logging  # noqa: E402
from train.sft_run import SFTRun  # noqa: E402


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name="sft")
def main(cfg: DictConfig) -> None:
    setup_logging()
    app = to_app_config(cfg)
    run = SFTRun(app, OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    run.setup()
    run.train()
    run.save()
    run.cleanup()


if __name__ == "__main__":
    main()
