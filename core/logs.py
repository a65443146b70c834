"""Quiet, one-line-per-event logging for the entry points.

Only rank 0 speaks unless `EDITFORGE_LOG_ALL_RANKS=1`; the libraries' INFO chatter (datasets'
cache messages, transformers' config dumps) is off, and progress bars are drawn only on a
terminal. `quiet_libraries` sets the libraries' own environment switches, so it must run
before they are imported; the entry wrapper calls it first thing.
"""

from __future__ import annotations

import logging
import os
import sys

ALL_RANKS_ENV = "EDITFORGE_LOG_ALL_RANKS"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def speaks() -> bool:
    """Whether this process logs at INFO: rank 0, or every rank when asked."""
    return rank() == 0 or os.environ.get(ALL_RANKS_ENV, "") not in ("", "0")


def quiet_libraries() -> None:
    """Library verbosity from their environment switches (read when they are imported)."""
    level = "warning" if speaks() else "error"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", level)
    os.environ.setdefault("DATASETS_VERBOSITY", level)
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not sys.stderr.isatty() or not speaks():  # bars in a log file are noise, one line each
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # bitsandbytes' CPU backend warns on import (peft and trl import it) that an optional kernel
    # from the hub is absent; it runs its own instead, so there is nothing to act on.
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    for client in ("httpx", "httpx2"):  # huggingface_hub's HTTP clients log every request at INFO
        logging.getLogger(client).setLevel(logging.WARNING)


def setup_logging() -> None:
    """Plain logging: INFO from the speaking rank, errors only from the others."""
    import warnings

    logging.basicConfig(format=FORMAT, level=logging.INFO if speaks() else logging.ERROR, force=True)
    # Deprecations inside the libraries' own calls (datasets sorting through pyarrow): nothing to act on.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(pyarrow|datasets|transformers)\.")
    if not speaks():
        warnings.simplefilter("ignore")  # rank 0 shows the same warnings once
