"""`python -m eval.apiupdate_edit` end to end on CPU with a tiny model: single and successive
regimes write results.json and the study's report; single resets, successive accumulates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO
from test_apiupdate_eval import SOURCE, _source

from core.entry import validate_overrides
from core.formats import FORMATS
from core.sandbox import make_sandbox
from eval.apiupdate.builder import BuildOptions, build, write
from eval.apiupdate_edit import APP, preflight, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    options = BuildOptions(
        types=("R1", "S4"),
        types_per_api="all",
        nonworkaround="none",
        targets={"reliability": 9, "generalization": 9, "specificity": 2},
    )
    with make_sandbox() as sandbox:
        write(build("humaneval", str(_source(out / "source.jsonl")), sandbox, options), out)
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, bench) -> Path:
    from transformers import AutoModelForCausalLM

    from train.config import TinyModelConfig
    from train.modeling import tiny_llama_config, train_tiny_tokenizer

    fmt = FORMATS["editcoder"]
    rows = [json.loads(line) for line in (bench / "problems.jsonl").read_text().splitlines()]
    texts = [fmt.prompt(r["prompt"], r["instruction"]) + fmt.completion(r["reference"]) for r in rows] * 3
    texts += [body for _, _, _, body, fix, _ in SOURCE for body in (body, fix)]
    tokenizer = train_tiny_tokenizer(texts, vocab_size=400)
    config = tiny_llama_config(TinyModelConfig(max_position_embeddings=1024), tokenizer)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny")
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _study(bench: Path, model: Path, out: Path, *overrides: str) -> dict:
    common = [
        f"benchmark.path={bench}",
        f"model.path={model}",
        "model.name=tiny",
        f"out={out}",
        "per_model_filter=false",
        "gen.n=2",
        "ks=[1,2]",
        "gen.max_new_tokens=12",
        "gen.temperature=0",
        "sandbox.workers=2",
    ]
    cfg = validate_overrides(APP, [*common, *overrides])
    run(cfg, {})
    return json.loads((out / "results.json").read_text())


def _tables(*runs: str) -> subprocess.CompletedProcess:
    """`python -m eval.tables apiupdate RUN...` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "eval.tables", "apiupdate", *runs],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _prompts(out: Path, phase: str) -> list[str]:
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return [r["prompt"] for r in rows if r["type"] == "sample" and r["split"].startswith(phase)]


def test_single_resets_and_successive_accumulates_with_the_prompt_editor(bench, tiny_model, tmp_path):
    single = _study(bench, tiny_model, tmp_path / "single", "editor=prompt", "regime=single")
    first, second = single["edits"]
    assert {first, second} == {"builtins.abs/R1", "builtins.abs/S4"}
    notice = {"builtins.abs/R1": "renamed to `absolute`", "builtins.abs/S4": "`abs` now returns a tuple"}
    for mod in (first, second):
        prompts = _prompts(tmp_path / "single", f"single@{mod}")
        assert prompts and all(notice[mod] in p for p in prompts)
        other = notice[second if mod == first else first]
        assert not any(other in p for p in prompts)  # reset before each API's edit
    succ = _study(bench, tiny_model, tmp_path / "succ", "editor=prompt", "regime=successive", "every=1")
    assert [t["edits"] for t in succ["trajectory"]] == [1, 2]
    last = _prompts(tmp_path / "succ", "successive@2")
    assert last and all(all(n in p for n in notice.values()) for p in last)  # both notices by now
    pre = _prompts(tmp_path / "succ", "pre")
    assert pre and not any("API update" in p for p in pre)
    for result in (single, succ):
        assert set(result["after"]) >= {"reliability", "generalization", "specificity"}
        assert result["shapley_k"] == 2 and "generalization" in result["shapley"]
    report = (tmp_path / "succ" / "report.md").read_text()
    assert "| tiny | prompt | successive | generalization |" in report and "Shapley" in report


# the tiny random model's settings: its last layer, few value steps, a few statistics chunks
# cached per test module, short prefixes; fits of a few steps (MALMEN, A-GRACE)
LOCATE = [
    "editor.options.v_steps=2",
    "editor.options.stats_samples=4",
    "editor.options.stats_chunk_tokens=64",
    "editor.options.prefixes=[[3,2]]",
]
LEARNT_AND_LOCATED = {
    "rome": ["editor.options.layer=1", *LOCATE],
    "memit": ["editor.options.layers=[0,1]", *LOCATE],
    "pmet": ["editor.options.layers=[0,1]", *LOCATE],
    "alphaedit": ["editor.options.layers=[0,1]", *LOCATE],
    "a-grace": [
        "editor.options.layer=1",
        "editor.options.n_iter=3",
        "editor.options.epochs=3",
        "editor.options.batch_size=4",
    ],
    "malmen": [
        "editor.options.layers=[1]",
        "editor.options.rank=8",
        "editor.options.steps=2",
        "editor.options.batch_size=1",
    ],
}


@pytest.fixture(scope="module")
def agrace_fit(tiny_model, tmp_path_factory) -> Path:
    """A-GRACE's encoder needs APIs with two edit examples or more, which this small build lacks
    (each API has one): it is fitted on edit prompts written here, and the study loads it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from core.editing import APIUpdate, EditExample
    from train.editors.agrace import AGRACEEditor, AGRACEOptions

    fmt = FORMATS["editcoder"]
    updates = [
        APIUpdate(
            f"math.{name}/R1",
            "",
            tuple(
                EditExample(fmt.prompt(f"x = {v}\n", f"Use {name} on {v}"), f"x = math.{name}({v})\n")
                for v in (1, 2, 3)
            ),
        )
        for name in ("sqrt", "floor", "ceil", "exp", "log")
    ]
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    folder = tmp_path_factory.mktemp("agrace")
    AGRACEEditor(model, tokenizer, AGRACEOptions(layer=1, epochs=3, batch_size=4, val_fraction=0.2)).fit(
        updates, folder
    )
    return folder


@pytest.fixture(autouse=True)
def moments_cache(tmp_path_factory, monkeypatch):
    """One second-moment cache for the module's runs (the editors' default is the user's cache)."""
    monkeypatch.setenv("EDITFORGE_CACHE", str(tmp_path_factory.getbasetemp() / "editforge-cache"))


@pytest.mark.parametrize(
    ("editor", "options"),
    [
        ("ft-l", ["editor.options.layer=1", "editor.options.steps=2", "editor.options.delta=0.01"]),
        ("grace", ["editor.options.layer=1", "editor.options.n_iter=3"]),
        ("lora", ["editor.options.steps=2"]),
        *((name, options) for name, options in LEARNT_AND_LOCATED.items()),
    ],
)
def test_weight_editors_run_both_regimes_end_to_end(bench, tiny_model, tmp_path, editor, options, agrace_fit):
    if editor == "a-grace":
        options = [*options, f"editor.options.checkpoint={agrace_fit}"]
    for regime in ("single", "successive"):
        out = tmp_path / regime
        result = _study(bench, tiny_model, out, f"editor={editor}", f"regime={regime}", *options)
        assert result["editor"] == editor and result["regime"] == regime
        gen = result["after"]["generalization"]
        assert gen["samples"] == 2 * gen["problems"] and 0.0 <= gen["pass@1"] <= gen["compiles@1"] <= 1.0
        report = (out / "report.md").read_text()
        assert f"| tiny | {editor} | {regime} | reliability |" in report
        if editor == "malmen":  # fitted on the benchmark's edit split (every API), once per out
            fitted = json.loads((out / "editor-fit" / "fitted.json").read_text())
            assert fitted["editor"] == editor and fitted["apis"] >= len(result["edits"])


def test_a_learned_editor_is_fitted_once_and_loaded_on_a_rerun(bench, tiny_model, tmp_path):
    options = ["editor=malmen", *LEARNT_AND_LOCATED["malmen"]]
    _study(bench, tiny_model, tmp_path, *options)
    marker = tmp_path / "editor-fit" / "fitted.json"
    stamp = marker.stat().st_mtime_ns
    checkpoint = sorted(p.name for p in (tmp_path / "editor-fit").iterdir())
    _study(bench, tiny_model, tmp_path, *options)  # a rerun (resume) loads, does not refit
    assert marker.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in (tmp_path / "editor-fit").iterdir()) == checkpoint
    other = tmp_path / "other"  # a fitted folder given as the checkpoint: nothing is fitted there
    _study(bench, tiny_model, other, *options, f"editor.options.checkpoint={tmp_path / 'editor-fit'}")
    assert not (other / "editor-fit").exists()


def test_a_killed_study_resumes_without_regenerating(bench, tiny_model, tmp_path):
    out = tmp_path / "resume"
    first = _study(bench, tiny_model, out, "editor=prompt", "regime=single")
    lines = (out / "samples.jsonl").read_text().splitlines()
    again = _study(bench, tiny_model, out, "editor=prompt", "regime=single")
    assert (out / "samples.jsonl").read_text().splitlines() == lines  # nothing generated or run twice
    assert again["after"] == first["after"]


def test_config_errors_are_one_line(bench, tmp_path):
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="regime"):
        validate_overrides(APP, [f"benchmark.path={bench}", "model.path=x/y", "regime=sometimes"])
    cfg = validate_overrides(APP, [f"benchmark.path={bench}"])  # --cfg job needs no paths
    with pytest.raises(ConfigError, match="model.path"):
        preflight(cfg)
    cfg = validate_overrides(
        APP, [f"benchmark.path={bench}", "model.path=x/y", "editor.target=nowhere:Nothing"]
    )
    with pytest.raises(ConfigError, match="nowhere"):
        preflight(cfg)


def test_another_editor_into_the_same_out_is_refused(bench, tiny_model, tmp_path):
    from core.errors import UserError

    _study(bench, tiny_model, tmp_path / "same", "editor=prompt", "regime=single")
    with pytest.raises(UserError, match="editor"):
        _study(bench, tiny_model, tmp_path / "same", "editor=ft-l", "regime=single", "editor.options.layer=1")


def test_max_apis_counts_apis_not_modifications(bench, tiny_model, tmp_path):
    """One API (builtins.abs) with two modifications: max_apis=1 keeps both."""
    result = _study(bench, tiny_model, tmp_path / "one", "editor=prompt", "regime=single", "max_apis=1")
    assert sorted(result["edits"]) == ["builtins.abs/R1", "builtins.abs/S4"]


def test_edit_budgets_set_where_a_successive_run_is_evaluated_and_stops(bench, tiny_model, tmp_path):
    """App. D evaluates GRACE under edit budgets; here two modifications, a budget of one edit."""
    result = _study(bench, tiny_model, tmp_path / "b", "editor=prompt", "regime=successive", "budgets=[1]")
    assert len(result["edits"]) == 1 and [t["edits"] for t in result["trajectory"]] == [1]
    with pytest.raises(Exception, match="budgets"):
        _study(bench, tiny_model, tmp_path / "c", "editor=prompt", "regime=single", "budgets=[1]")


def test_the_non_workaroundable_rows_are_exempt_from_the_pre_edit_filter(tiny_model, tmp_path):
    """App. B's rows stay in the study although an unedited model need not solve them."""
    bench = tmp_path / "bench"
    options = BuildOptions(targets={"reliability": 9, "generalization": 9, "specificity": 2})
    with make_sandbox() as sandbox:
        built = build("humaneval", str(_source(tmp_path / "source.jsonl")), sandbox, options)
        write(built, bench)
    assert built.manifest["rows_per_split"].get("nonworkaround", 0) > 0
    overrides = [
        f"benchmark.path={bench}", f"model.path={tiny_model}", "model.name=tiny", f"out={tmp_path / 'out'}",
        "per_model_filter=true", "gen.n=1", "ks=[1]", "gen.max_new_tokens=8", "gen.temperature=0",
        "sandbox.workers=2", "editor=prompt", "regime=single",
    ]  # fmt: skip
    run(validate_overrides(APP, overrides), {})
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert result["after"]["nonworkaround"]["samples"] > 0, result["after"].keys()


def test_every_editor_side_by_side_in_table_4(bench, tiny_model, tmp_path, agrace_fit):
    """The study's Table 4 layout (editors as rows, per model Gen./Spec. C@k P@k ... ΔP CF) with
    the seeds' seven methods and ours beside them."""
    runs = []
    options = {
        "ft-l": ["editor.options.layer=1", "editor.options.steps=1"],
        "grace": ["editor.options.layer=1", "editor.options.n_iter=1"],
        **LEARNT_AND_LOCATED,
    }
    options["a-grace"] = [*options["a-grace"], f"editor.options.checkpoint={agrace_fit}"]
    for editor, extra in options.items():
        out = tmp_path / editor
        _study(bench, tiny_model, out, f"editor={editor}", "regime=single", "max_apis=1", *extra)
        runs.append(str(out))
    done = _tables(*runs)
    assert done.returncode == 0, done.stderr
    table4 = done.stdout.split("## Table 4:")[1].split("## ")[0]
    for editor in options:
        assert f"| {editor} |" in table4, editor


def test_the_papers_tables_regenerate_from_finished_runs(bench, tiny_model, tmp_path):
    """`python -m eval.tables apiupdate RUN...`: Tables 4-7 and 9-14 from the study's own runs."""
    runs = []
    for regime in ("single", "successive"):
        for editor in ("prompt", "lora"):
            out = tmp_path / f"{editor}-{regime}"
            options = ["editor.options.steps=1"] if editor == "lora" else []
            _study(bench, tiny_model, out, f"editor={editor}", f"regime={regime}", *options)
            runs.append(str(out))
    done = _tables(*runs)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for heading in ("Table 4:", "Table 5:", "Table 6:", "Table 7:", "Table 9:", "Table 12:"):
        assert f"## {heading}" in text, heading
    assert "| pre-edit |" in text and "| prompt |" in text and "| lora |" in text
    assert "tiny Gen. C@2" in text and "Gen. ΔP (avg)" in text
    for folder in runs:  # every column traces to its run, and each run drew its C/P/A/W bars
        assert f"| {folder} |" in text
        assert (Path(folder) / "plot.png").read_bytes()[:4] == b"\x89PNG"
    table6 = text.split("## Table 6:")[1].split("## ")[0]
    assert "(built with nonworkaround=none)" in table6 and "–" not in table6
    missing = _tables(str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "eval.apiupdate_edit" in missing.stderr
