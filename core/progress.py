"""Progress bars: tqdm's choice of a notebook widget or a console bar, without the asyncio base
class that `tqdm.auto` adds (no bar here is iterated asynchronously, and asyncio is about 15 ms of
every command's start-up)."""

from __future__ import annotations

import warnings

from tqdm.std import TqdmExperimentalWarning

with warnings.catch_warnings():  # as tqdm.auto: notebook mode is not an experiment to warn about
    warnings.simplefilter("ignore", category=TqdmExperimentalWarning)
    from tqdm.autonotebook import tqdm

__all__ = ["tqdm"]
