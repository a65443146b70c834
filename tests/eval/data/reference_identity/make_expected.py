"""Regenerate expected.json by running every case twice with the code on PYTHONPATH (`PYTHONPATH=<old checkout> python tests/eval/data/reference_identity/make_expected.py [--rebuild-inputs]`)."""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent
REPO = DATA.parents[3]  # the checkout these tests live in
EXPECTED = DATA / "expected.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
# Machine-dependent fields, dropped wherever they occur in metrics or per_problem (none occur in
# today's output; listed so that a refactor adding timings does not break the comparison).
STRIPPED_KEYS = frozenset({"duration_s", "durations", "timing", "timings", "elapsed_s", "wall_s", "seconds"})

N2 = ["gen.n=2", "score.ks=[1,2]"]
N1 = ["gen.n=1", "score.ks=[1]"]
HEF = ["benchmark=humanevalfix", "sandbox.limits.timeout_s=5"]  # 3 buggy python programs never end


def _pair(name: str, overrides: list[str]) -> dict[str, list[str]]:
    return {f"{name}-{m}": [*overrides, f"model={m}"] for m in ("reference", "identity")}


# case name -> overrides; {data} is this folder, {novelapi} a folder made by novelapi_folder().
CASES: dict[str, list[str]] = {
    **_pair("fixtures", ["benchmark=fixtures", *N2]),
    **_pair("canitedit", ["benchmark=canitedit", "benchmark.path={data}/canitedit_sample.jsonl", *N2]),
    **{
        k: v
        for variant in ("fix", "fixtests", "fixdocs")
        for k, v in _pair(
            f"humanevalfix-python-{variant}",
            [*HEF, "benchmark.languages=[python]", f"benchmark.variant={variant}", *N1],  # all 164
        ).items()
    },
    **{
        k: v
        for lang, n in (("js", N2), ("cpp", N1), ("java", N1))  # a compile per sample: n=1
        for k, v in _pair(
            f"humanevalfix-{lang}-fixtests",
            [*HEF, f"benchmark.languages=[{lang}]", "benchmark.variant=fixtests", "benchmark.limit=8", *n],
        ).items()
    },
    **_pair("editbench", ["benchmark=editbench", "benchmark.path={data}/editbench_sample.jsonl", *N2]),
    **_pair("apiupdate", ["benchmark=apiupdate", "benchmark.path={data}/apiupdate", *N2]),
    **_pair("novelapi", ["benchmark=novelapi", "benchmark.path={novelapi}", *N2]),
}


def strip(value: Any) -> Any:
    """`value` without the keys in STRIPPED_KEYS, at any depth (JSON round-tripped)."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in STRIPPED_KEYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def novelapi_folder(out: Path, python: str) -> Path:
    """A built novelapi folder: the stored tasks and bundles, discovery.json naming `python`."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tasks.jsonl", "bundles.jsonl"):
        shutil.copy(DATA / "novelapi" / name, out / name)
    (out / "discovery.json").write_text(json.dumps({"library": "novlib", "python": {"new": python}}))
    return out


def resolve(overrides: list[str], novelapi: Path | None) -> list[str]:
    return [o.replace("{data}", str(DATA)).replace("{novelapi}", str(novelapi)) for o in overrides]


def run_case(overrides: list[str], out: Path, cwd: Path, novelapi: Path | None = None) -> dict[str, Any]:
    """`python -m eval.run` of the code in `cwd` into `out`: stripped metrics and per_problem."""
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(cwd)}
    args = [sys.executable, "-m", "eval.run", *resolve(overrides, novelapi), f"out={out}"]
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    results = json.loads((out / "results.json").read_text())
    per_problem = json.loads((out / "per_problem.json").read_text())
    return {"metrics": strip(results["metrics"]), "per_problem": strip(per_problem)}


# ----------------------------------------------------------------------------- inputs (once)
def make_novlib_python(root: Path) -> str:
    """The novlib interpreter of test_novel_tasks.py's `python` fixture, made in `root`."""
    from test_novel_tasks import make_novlib_python as make  # main() put the tests on sys.path

    return make(root)


def rebuild_inputs(old: Path, tmp: Path, python: str) -> None:
    """apiupdate/problems.jsonl (a subset of a full HumanEval build) and novelapi/{tasks,bundles}.jsonl."""
    built = tmp / "apiupdate-full"
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(old)}
    cmd = [sys.executable, "-m", "eval.build_apiupdate", "source=humaneval", f"out={built}"]
    subprocess.run(cmd, cwd=old, env=env, check=True, capture_output=True)
    rows = sorted((json.loads(line) for line in (built / "problems.jsonl").open()), key=lambda r: r["id"])
    quota = {"reliability": 3, "generalization": 3, "specificity": 3, "nonworkaround": 2}
    groups: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    for distinct in (True, False):  # first one row per API, then fill up
        for r in rows:
            g = groups[(r["split"], r["type"])]
            if (
                len(g) < quota[r["split"]]
                and r not in g
                and not (distinct and r["api"] in {x["api"] for x in g})
            ):
                g.append(r)
    (DATA / "apiupdate").mkdir(exist_ok=True)
    with (DATA / "apiupdate" / "problems.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for k in sorted(groups) for r in groups[k])

    from test_novel_tasks import BUNDLE  # as tests/test_novelapi_eval.py's `folder` fixture
    from test_novelapi_eval import SECOND

    from core.sandbox import make_sandbox
    from data_pipeline.novel_api.tasks import build_tasks, write_jsonl

    with make_sandbox(workers=2, python=python) as sandbox:
        tasks, _ = build_tasks([BUNDLE, SECOND], sandbox)
    keep = {("novlib.text.slugify", 2), ("novlib.text.title_slug", 1)}
    tasks = [{**t, "split": "test"} for t in tasks if (t["qualname"], t["level"]) in keep]
    (DATA / "novelapi").mkdir(exist_ok=True)
    write_jsonl(tasks, DATA / "novelapi" / "tasks.jsonl")
    write_jsonl([BUNDLE, SECOND], DATA / "novelapi" / "bundles.jsonl")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rebuild-inputs", action="store_true", help="rebuild the apiupdate/novelapi inputs first"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per case; all must agree")
    parser.add_argument("--cases", nargs="*", default=None, help="only these cases (others kept as stored)")
    args = parser.parse_args()
    import eval as old_eval  # the code under PYTHONPATH

    old = Path(old_eval.__file__).resolve().parents[1]
    # its fixtures (test_novel_tasks, test_novelapi_eval), in the test folders as conftest.py lists them
    for folder in sorted(
        {p.parent for p in (old / "tests").rglob("test_*.py")} | {old / "tests"}, reverse=True
    ):
        sys.path.insert(0, str(folder))
    print(f"code: {old}", file=sys.stderr)
    expected = json.loads(EXPECTED.read_text()) if EXPECTED.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        python = make_novlib_python(tmp)
        if args.rebuild_inputs:
            rebuild_inputs(old, tmp, python)
        novelapi = novelapi_folder(tmp / "novelapi", python)
        for name, overrides in CASES.items():
            if args.cases is not None and name not in args.cases:
                continue
            outputs, times = [], []
            for i in range(args.runs):
                start = time.monotonic()
                outputs.append(run_case(overrides, tmp / f"{name}-{i}", old, novelapi))
                times.append(time.monotonic() - start)
            if any(o != outputs[0] for o in outputs[1:]):
                raise SystemExit(f"{name}: the {args.runs} runs differ")
            print(f"{name}: {' '.join(f'{t:.1f}s' for t in times)}", file=sys.stderr)
            expected[name] = {"overrides": overrides, **outputs[0]}
    expected = {name: expected[name] for name in CASES if name in expected}
    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
