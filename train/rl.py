"""Reinforcement learning on code edits with execution rewards (trl's GRPO / RLOO).

torchrun --nproc_per_node 8 train/rl.py recipe=editcoder-1.3b-grpo
python train/sft.py recipe=tiny-warmup && python train/rl.py recipe=tiny-grpo
python train/rl.py recipe=tiny-grpo --cfg job      # print the resolved config

The config is validated and the machine checked (`train/rl_config.py`) before torch,
transformers and trl are imported, so a mistake is reported in about a second.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import the repo's packages, not train/'s modules
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from core.entry import App, run_app  # noqa: E402
from train.rl_config import RLAppConfig, preflight  # noqa: E402

log = logging.getLogger("train.rl")


def train(app: RLAppConfig, resolved: dict[str, Any]) -> None:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if not {"wandb", "all"} & set(app.run.report_to):
        os.environ.pop("WANDB_MODE", None)
    from train.rl_run import RLRun  # the heavy stack, once the config is known to be good

    run = RLRun(app, resolved)
    try:
        run.setup()
        run.train()
        final = run.save()
        run.push()
        log.info("wrote %s", final)
    finally:
        run.close()


APP = App("rl", RLAppConfig, run=train, preflight=preflight, output_key="run.output_dir")

if __name__ == "__main__":
    run_app(APP)
