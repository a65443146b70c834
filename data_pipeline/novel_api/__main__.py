"""`python -m data_pipeline.novel_api STAGE key=value ...`: the novel-API knowledge pipeline.

Stages, each reading what the one before wrote into `out` (so they run one at a time, on
different machines, or all at once): discover -> bundles -> tasks -> validate -> corpus.
The config is validated before anything is installed or run; see `configs/novel_api.yaml`.
"""

from __future__ import annotations

import sys

from core.entry import run_app
from data_pipeline.novel_api.app import APP, STAGES


def main(argv: list[str]) -> None:
    stage = argv[0] if argv and "=" not in argv[0] and not argv[0].startswith("-") else None
    if stage is not None and stage not in STAGES:
        print(f"error: unknown stage {stage!r}; choose one of {', '.join(STAGES)}", file=sys.stderr)
        sys.exit(2)
    rest = argv[1:] if stage else argv
    run_app(APP, [*rest, f"stage={stage}"] if stage else rest)


if __name__ == "__main__":
    main(sys.argv[1:])
