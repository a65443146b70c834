"""Supervised fine-tuning of code-edit models.

torchrun --nproc_per_node 8 train/sft.py recipe=editcoder-6.7b
python train/sft.py recipe=tiny run.output_dir=runs/tiny
python train/sft.py recipe=editcoder-6.7b --cfg job      # print the resolved config

The config is validated and the machine checked (`train/config.py`) before torch,
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
from train.config import SFTAppConfig, preflight, settle_liger  # noqa: E402

log = logging.getLogger("train.sft")


def train(app: SFTAppConfig, resolved: dict[str, Any]) -> None:
    import torch

    # DeepSpeed warns on every rank when it falls back to CPU by auto-detection: name the CPU.
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # transformers prints a line per rank when it sees WANDB_MODE
    if not {"wandb", "all"} & set(app.run.report_to):
        os.environ.pop("WANDB_MODE", None)
    from train.sft_run import SFTRun  # the heavy stack, once the config is known to be good

    settle_liger(app.recipe)  # logs the choice; the record (final/config.yaml, the tracker) keeps what ran
    resolved["recipe"]["liger_kernels"] = app.recipe.liger_kernels

    run = SFTRun(app, resolved)
    if run.finished():
        log.info(
            "%s already holds this run, finished at step %d: nothing to train, its outputs are left as "
            "they are (raise run.max_steps or recipe.epochs to train on, or choose a new run.output_dir)",
            run.output_dir,
            run.start_step,
        )
        return
    run.setup()
    run.train()
    run.save()
    run.push()
    run.cleanup()


APP = App("sft", SFTAppConfig, run=train, preflight=preflight, output_key="run.output_dir")

if __name__ == "__main__":
    run_app(APP)
