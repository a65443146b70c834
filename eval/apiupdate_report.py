"""Put several editing-study runs in one report (the study's layout: model x editor x regime).

    python -m eval.apiupdate_report runs/apiupdate/*/ --out runs/apiupdate/report.md

Reads each folder's results.json (written by `python -m eval.apiupdate_edit`); rows with
several models get mean rows (means of per-model values).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eval.apiupdate.report import render_study_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.apiupdate_report", description=__doc__.splitlines()[0]
    )
    parser.add_argument("runs", nargs="+", type=Path, help="folders with a results.json")
    parser.add_argument("--out", type=Path, help="write the report here (default: print it)")
    args = parser.parse_args(argv)
    results = []
    for run in args.runs:
        path = run / "results.json" if run.is_dir() else run
        if not path.is_file():
            print(
                f"error: {path} does not exist; give folders written by python -m eval.apiupdate_edit",
                file=sys.stderr,
            )
            return 2
        results.append(json.loads(path.read_text()))
    ks = {r["shapley_k"] for r in results}
    if len(ks) != 1:
        print(
            f"error: the runs were scored at different k {sorted(ks)}; use the same gen.n and ks",
            file=sys.stderr,
        )
        return 2
    report = render_study_report(results, ks.pop())
    if args.out:
        args.out.write_text(report)
    else:
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
