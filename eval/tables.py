"""Finished runs into a paper's table layout, each cell traceable to the run it came from.

    python -m eval.tables apiupdate runs/apiupdate/*/        # Tables 4-7, 9-14, then every split
    python -m eval.tables novelapi runs/novelapi/*/          # the cell table, cross-model pass@1, failure stacks
    python -m eval.tables audit audits/canitedit audits/editbench   # Table 1, the RQ2/RQ3 figures
    python -m eval.tables compare runs/eval-a runs/eval-b --out t/compare.md   # runs side by side (+ .png)

Each paper's module (`eval/<paper>/tables.py`) has `tables(runs) -> str` (Markdown); a folder
that is not a finished run of that kind stops with one line naming it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError

PAPERS = {
    "apiupdate": ("eval.apiupdate.tables", "the API-update editing study (python -m eval.apiupdate_edit)"),
    "novelapi": ("eval.novelapi.tables", "NovelAPIBench (python -m eval.run benchmark=novelapi)"),
    "audit": ("eval.audit.tables", "the benchmark audit (python -m eval.audit)"),
    "compare": ("eval.compare.tables", "ordinary evaluation runs (python -m eval.run)"),
}


def read_run(run: Path, name: str, made_by: str) -> dict[str, Any]:
    """`run`/`name` parsed, or a UserError saying which command writes it."""
    path = run / name if run.is_dir() else run
    if not path.is_file():
        raise UserError(f"{path} does not exist: give folders written by {made_by}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path} is not a finished run ({err}); run {made_by} again") from None


def markdown(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return lines


def number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.tables", description=__doc__.splitlines()[0])
    parser.add_argument("paper", choices=sorted(PAPERS), help="whose tables")
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders")
    parser.add_argument("--out", type=Path, help="write the tables here (default: print them)")
    args = parser.parse_args(argv)
    module = importlib.import_module(PAPERS[args.paper][0])
    try:
        text = module.tables(args.runs)
        if args.out and hasattr(module, "plot"):  # its figure beside the tables
            module.plot(args.runs, args.out.with_suffix(".png"))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
