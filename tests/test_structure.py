"""The package structure: train, data_pipeline and eval share core/ and never import each other;
decontamination reads every benchmark through evaluation's loaders and sees the texts it shows."""

from __future__ import annotations

import ast

import pytest
from conftest import REPO

import core.benchmarks
from core.formats import FORMATS

STAGES = ("train", "data_pipeline", "eval")


def imported_packages(package: str) -> dict[str, set[str]]:
    """Top-level packages each module of `package` imports (relative imports stay inside it)."""
    found: dict[str, set[str]] = {}
    for file in sorted((REPO / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(file.relative_to(REPO))] = names
    return found


# The one layer that composes stages: RL rewards a policy with evaluation's verdicts (a reward is
# a benchmark kind's `execute`, never a copy) on tasks decontaminated as training data is.
COMPOSERS = {
    "train/rl_probe.py": ["eval"],
    "train/rl_rewards.py": ["eval"],
    "train/rl_run.py": ["eval"],
    "train/rl_tasks.py": ["data_pipeline", "eval"],
}


@pytest.mark.parametrize("package", STAGES)
def test_a_stage_imports_core_and_never_another_stage(package):
    others = set(STAGES) - {package}
    crossing = {m: sorted(n & others) for m, n in imported_packages(package).items() if n & others}
    allowed = {m: stages for m, stages in COMPOSERS.items() if m.startswith(f"{package}/")}
    assert crossing == allowed, f"{package} imports another stage: {crossing}"
    assert any("core" in n for n in imported_packages(package).values())


def test_core_imports_no_stage():
    crossing = {m: sorted(n & set(STAGES)) for m, n in imported_packages("core").items() if n & set(STAGES)}
    assert not crossing, crossing


def test_core_imports_nothing_heavy_at_module_level():
    heavy = {"torch", "transformers", "trl", "peft", "accelerate", "datasets", "deepspeed", "numba"}
    # The near-duplicate engine is compiled code, loaded only by what runs it (never by the package).
    kernels = {"minhash.py", "lsh.py", "clusters.py", "dedup.py", "pairs.py"}
    for file in sorted((REPO / "core").rglob("*.py")):
        tree = ast.parse(file.read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom) and n.module}
        if file.parent == REPO / "core" / "neardup" and file.name in kernels:
            names -= {"numba"}
        assert not names & heavy, f"{file}: {sorted(names & heavy)}"


# ------------------------------------------------------------ one loader for eval and decontamination
def _eval_config(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from eval.run import to_eval_config

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return to_eval_config(compose(config_name="eval", overrides=[*overrides, "model=reference"]))


@pytest.fixture
def loads(monkeypatch):
    """Every call of core's benchmark loader, from whichever side."""
    calls: list[dict] = []
    for kind in list(core.benchmarks.KINDS.values()):

        def spy(options, load=kind.load):
            calls.append(options.identity())
            return load(options)

        monkeypatch.setattr(kind, "load", spy)
    return calls


@pytest.mark.parametrize(
    "benchmark, overrides",
    [
        ("fixtures", []),  # the project's CanItEdit-schema fixtures
        ("canitedit", [f"benchmark.path={REPO / 'tests' / 'fixtures' / 'canitedit_sample.jsonl'}"]),
        ("humanevalfix", []),  # the shipped HumanEvalPack copy, every variant
        ("humanevalfix", ["benchmark.variant=fixdocs"]),
        ("humanevalfix", ["benchmark.variant=fix"]),
    ],
)
def test_decontamination_sees_the_texts_evaluation_shows(tmp_path, loads, benchmark, overrides):
    from core.neardup.instructions import normalize_instruction
    from data_pipeline.config import DecontamOptions, DedupOptions
    from data_pipeline.decontam import BenchmarkIndex, load_benchmarks
    from eval.evaluation import EvalRun
    from eval.generate import build_requests

    cfg = _eval_config([f"benchmark={benchmark}", f"out={tmp_path}", *overrides])
    run = EvalRun(cfg, {})
    run.close()
    evaluated = loads[-1]
    benchmarks = load_benchmarks([cfg.benchmark])
    assert evaluated in loads[1:], "decontamination loaded the benchmark some other way"

    programs = {text for b in benchmarks for text in b.programs()}
    instructions = {normalize_instruction(text) for b in benchmarks for text in b.instructions()}
    problems = list(run.problems.values())
    for request in build_requests(problems, run.splits, FORMATS["editcoder"]):
        p = request.problem
        assert p.before in programs and p.after in programs
        assert p.before in request.prompt and request.instruction in request.prompt
        assert normalize_instruction(request.instruction) in instructions

    # and the index built from them catches a verbatim copy of what the model is shown
    opts = DecontamOptions(benchmarks=[cfg.benchmark])
    index = BenchmarkIndex(benchmarks, opts, DedupOptions())
    assert index.code_matches([problems[0].before]) != [None]
