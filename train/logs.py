"""Logging for multi-process runs: rank 0 speaks at INFO, the other ranks only warn."""

from __future__ import annotations

import logging
import os

import datasets
import transformers


def setup_logging() -> None:
    rank = int(os.environ.get("RANK", "0"))
    level = logging.INFO if rank == 0 else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level, force=True)
    transformers.logging.set_verbosity(level)
    datasets.logging.set_verbosity(level if rank == 0 else logging.ERROR)
    if rank != 0:
        datasets.disable_progress_bars()
