"""`python -m eval.run` end to end: benchmarks check themselves, bad samples fail with a status,
killed runs resume, stages split across machines, results have the documented shape."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import REPO, JSONHandler, local_server

from eval.evaluation import EvalRun
from eval.run import to_eval_config

HUMANEVALPACK = REPO / "core" / "data" / "humanevalpack"  # shipped (MIT)


def compose_eval(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import eval.config  # noqa: F401  (registers the structured schema)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return compose(config_name="eval", overrides=overrides)


def run_eval(overrides: list[str], stages=("generate", "execute", "score")) -> dict:
    from omegaconf import OmegaConf

    cfg = compose_eval(overrides)
    run = EvalRun(to_eval_config(cfg), OmegaConf.to_container(cfg, resolve=True))
    try:
        results = None
        for stage in stages:
            results = getattr(run, stage)()
        return results
    finally:
        run.close()


class _RecordingEndpoint(JSONHandler, BaseHTTPRequestHandler):
    """An OpenAI-compatible /completions endpoint that records each request body."""

    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802  (http.server's naming)
        body = self.read_json()
        type(self).bodies.append(body)
        self.reply_json({"choices": [{"text": "x = 1\n"}] * body["n"]})


@pytest.fixture
def endpoint():
    _RecordingEndpoint.bodies = []
    with local_server(_RecordingEndpoint) as url:
        yield f"{url}/v1"


def _requests_sent(endpoint: str, out: Path, overrides: list[str]) -> list[dict]:
    """Run the generate stage against the recording endpoint; the request bodies it received."""
    _RecordingEndpoint.bodies = []
    common = ["benchmark=fixtures", "benchmark.limit=1", "backend=openai", "backend.chat=false"]
    run_eval(
        [*common, f"backend.base_url={endpoint}", "model.name=served", f"out={out}", *overrides],
        stages=("generate",),
    )
    return list(_RecordingEndpoint.bodies)


def test_interface_overrides_reach_the_config_and_the_generation_request(tmp_path, endpoint):
    overrides = ["gen.n=3", "gen.temperature=0.8", "gen.top_p=0.9", "gen.max_new_tokens=64", "gen.seed=7"]
    cfg = to_eval_config(compose_eval([*overrides, f"out={tmp_path}", "model=reference"]))
    assert (cfg.gen.n, cfg.gen.temperature, cfg.gen.top_p, cfg.gen.max_new_tokens, cfg.gen.seed) == (
        3,
        0.8,
        0.9,
        64,
        7,
    )
    assert cfg.model.kind == "reference" and cfg.out == str(tmp_path)
    sent = _requests_sent(endpoint, tmp_path / "over", overrides)
    assert len(sent) == 2  # one problem, two instruction kinds
    from core.benchmarks import load_benchmark
    from eval.generation.base import sample_seed

    first = load_benchmark("fixtures").problems[0].id
    # each request seeded by its first sample's own seed, derived from gen.seed (eval/generation/openai.py)
    seeds = {sample_seed(7, first, split, 0) for split in ("descriptive", "lazy")}
    assert {body["seed"] for body in sent} == seeds
    for body in sent:
        assert (body["n"], body["temperature"], body["top_p"], body["max_tokens"]) == (3, 0.8, 0.9, 64)
    assert sent[0]["prompt"].startswith("## Code Before:\n")
    # without overrides: the CanItEdit paper's sampling, up to 8192 new tokens
    default = _requests_sent(endpoint, tmp_path / "default", [])
    for body in default:
        assert (body["n"], body["temperature"], body["top_p"], body["max_tokens"]) == (20, 0.2, 0.95, 8192)
    samples = [json.loads(line) for line in (tmp_path / "default" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 20 and samples[0]["code"] == "x = 1\n"
    with pytest.raises(ValueError, match="max_new_tokens"):
        to_eval_config(compose_eval(["gen.max_new_tokens=0", "model=reference"])).validate()


def test_fixtures_check_themselves(tmp_path):
    ref = run_eval(["benchmark=fixtures", "model=reference", "gen.n=2", f"out={tmp_path}/ref"])
    for split in ("descriptive", "lazy"):
        m = ref["metrics"][split]
        assert (
            m["pass@1"] == 1.0 and m["problems"] >= 12 and m["excess_code"] >= 0.0
        )  # value: test_excess_code
        assert "pass@5" not in m  # k > n is never reported
    ident = run_eval(
        ["benchmark=fixtures", "model=identity", "gen.n=1", "score.excess_code=false", f"out={tmp_path}/id"]
    )
    assert all(m["pass@1"] == 0.0 for m in ident["metrics"].values())
    results = json.loads((tmp_path / "ref" / "results.json").read_text())
    assert set(results) >= {"metrics", "config"} and results["metrics"]["lazy"]["pass@1"] == 1.0
    report = (tmp_path / "ref" / "report.md").read_text()
    for split in ("descriptive", "lazy"):
        assert re.search(
            # pass@1, the paper's ExcessCode (no standard error published), the repository's with one
            rf"^\| reference \| {split} \| 100\.0 ± 0\.0 \| \d+\.\d\d \| \d+\.\d\d ± \d+\.\d\d \|",
            report,
            re.M,
        )
    assert "## Per problem" in report


@pytest.mark.slow
@pytest.mark.skipif(not HUMANEVALPACK.is_dir(), reason="needs core/data/humanevalpack")
# every problem of python, js, go and rust: test_humanevalfix.py
@pytest.mark.parametrize("language, limit", [("cpp", 10), ("java", 10), ("go", 4), ("rust", 4)])
def test_humanevalfix_other_languages_check_themselves(tmp_path, language, limit):
    from eval.languages import available_languages

    if language not in available_languages():
        pytest.skip(f"no toolchain for {language}")
    common = [
        "benchmark=humanevalfix",
        f"benchmark.path={HUMANEVALPACK}",
        f"benchmark.languages=[{language}]",
        "gen.n=1",
        "score.excess_code=false",
        "sandbox.limits.timeout_s=10",
    ]
    if limit:
        common.append(f"benchmark.limit={limit}")
    ref = run_eval([*common, "model=reference", f"out={tmp_path}/ref"])["metrics"][language]
    ident = run_eval([*common, "model=identity", f"out={tmp_path}/id"])["metrics"][language]
    assert (ref["problems"], ref["pass@1"], ident["pass@1"]) == (limit or 164, 1.0, 0.0)


def _write_samples(out: Path, codes: dict[str, str]) -> None:
    """Samples made elsewhere (stage=generate on another machine): one per fixture problem."""
    out.mkdir(parents=True)
    with (out / "samples.jsonl").open("w") as fh:
        for i, (problem, code) in enumerate(codes.items()):
            fh.write(
                json.dumps(
                    {
                        "type": "sample",
                        "problem": problem,
                        "split": "descriptive",
                        "index": 0,
                        "prompt": "",
                        "completion": code,
                        "code": code,
                    }
                )
                + "\n"
            )
            del i


def test_bad_completions_fail_with_a_status_that_says_why(tmp_path):
    from core.benchmarks import load_benchmark

    ids = [p.id for p in load_benchmark("fixtures").problems]
    codes = {
        ids[0]: "",
        ids[1]: "this is not code, sorry!",
        ids[2]: "x = 1\n" * 100_000,
        ids[3]: "while True:\n    pass\n",
        ids[4]: "import os\nos._exit(0)\n",
        ids[5]: "raise RuntimeError('boom')\n",
    }
    out = tmp_path / "bad"
    _write_samples(out, codes)
    results = run_eval(
        [
            "benchmark=fixtures",
            "benchmark.splits=[descriptive]",
            "model=identity",
            "gen.n=1",
            f"out={out}",
            "sandbox.limits.timeout_s=2",
        ],
        stages=("execute", "score"),
    )
    executions = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "execution":
            executions[record["problem"]] = record
    status = {p: executions[p]["status"] for p in codes}
    assert status[ids[0]] == "empty" and status[ids[1]] == "syntax_error" and status[ids[2]] == "too_large"
    assert status[ids[3]] == "timeout" and status[ids[4]] != "passed" and status[ids[5]] == "failed"
    assert not any(e["passed"] for e in executions.values())
    assert results["metrics"]["descriptive"]["pass@1"] == 0.0


def test_a_killed_run_resumes_without_redoing_finished_work(tmp_path):
    overrides = ["benchmark=fixtures", "model=reference", "gen.n=3", "score.excess_code=false"]
    whole = run_eval([*overrides, f"out={tmp_path}/whole"])
    out = tmp_path / "killed"
    run_eval([*overrides, f"out={out}"], stages=("generate",))
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    kept = lines[: len(lines) // 2]
    (out / "samples.jsonl").write_text("".join(kept) + lines[len(kept)][:25])  # killed mid-write
    from omegaconf import OmegaConf

    cfg = compose_eval([*overrides, f"out={out}"])
    run = EvalRun(to_eval_config(cfg), OmegaConf.to_container(cfg, resolve=True))
    made = run.generate()
    run.execute()
    resumed = run.score()
    run.close()
    assert made == len(lines) - len(kept)
    assert (out / "samples.jsonl").read_text().startswith("".join(kept))
    assert resumed["metrics"] == whole["metrics"]


def test_stages_run_separately_from_the_command_line(tmp_path):
    base = [
        sys.executable,
        "-m",
        "eval.run",
        "benchmark=fixtures",
        "model=reference",
        "gen.n=1",
        "score.excess_code=false",
        f"out={tmp_path}",
    ]
    for stage in ("generate", "execute", "score"):
        proc = subprocess.run(
            [*base, f"stage={stage}"], cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| reference | descriptive | 100.0 ± 0.0 |" in proc.stdout and "Per problem" not in proc.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["metrics"]["descriptive"]["pass@1"] == 1.0
    bad = subprocess.run(
        [*base[:3], "benchmark=fixtures", "model=reference", f"benchmark.path={tmp_path}/none.jsonl"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "none.jsonl" in bad.stderr and "no such file" in bad.stderr


def test_metrics_go_to_wandb_when_asked(tmp_path):
    run_eval(
        [
            "benchmark=fixtures",
            "model=reference",
            "gen.n=1",
            "score.excess_code=false",
            "wandb.enabled=true",
            f"out={tmp_path}",
        ]
    )
    [offline] = list((tmp_path / "wandb").glob("offline-run-*"))
    records = next(offline.glob("run-*.wandb"))
    for _ in range(100):  # wandb's service process writes the file after finish() returns
        if b"descriptive/pass@1" in records.read_bytes():
            break
        time.sleep(0.1)
    assert b"descriptive/pass@1" in records.read_bytes()


def test_another_model_into_the_same_out_is_refused(tmp_path):
    from core.errors import UserError

    run_eval(["benchmark=fixtures", "model=reference", "gen.n=1", "score.ks=[1]", f"out={tmp_path}"])
    with pytest.raises(UserError, match="model"):
        run_eval(["benchmark=fixtures", "model=identity", "gen.n=1", "score.ks=[1]", f"out={tmp_path}"])


def test_benchmark_limit_takes_the_first_problems_of_each_language():
    from core.benchmarks import load_benchmark
    from eval.evaluation import first_per_split

    problems = load_benchmark("humanevalfix", None, languages=["python", "js"]).problems
    kept = first_per_split(problems, 3)
    assert [p.id for p in kept] == [f"Python/{i}" for i in range(3)] + [f"JavaScript/{i}" for i in range(3)]
    canitedit_like = load_benchmark("fixtures").problems  # two splits each: the first N problems
    assert first_per_split(canitedit_like, 2) == canitedit_like[:2]


def test_eval_tables_compare_puts_runs_of_several_models_side_by_side(tmp_path):
    for model in ("reference", "identity"):
        run_eval(
            [
                "benchmark=fixtures",
                f"model={model}",
                "gen.n=1",
                "score.excess_code=false",
                f"out={tmp_path / model}",
            ]
        )
    out = tmp_path / "tables" / "compare.md"
    done = subprocess.run(
        [sys.executable, "-m", "eval.tables", "compare", str(tmp_path / "reference"), str(tmp_path / "identity"),
         "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "## fixtures" in text and f"reference (`{tmp_path / 'reference'}`)" in text
    assert "| descriptive | pass@1 | 100.0 ± 0.0 | 0.0 ± 0.0 |" in text
    assert out.with_suffix(".png").stat().st_size > 1000
    bad = subprocess.run(
        [sys.executable, "-m", "eval.tables", "compare", str(tmp_path / "nothing")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "python -m eval.run" in bad.stderr


def test_a_sandbox_that_cannot_start_stops_a_model_before_it_generates(tmp_path, endpoint, monkeypatch):
    """The sandbox starts on a thread while the run goes on; a model's generation waits for it, so a
    broken sandbox costs no generation; an oracle's samples (no cost) are kept, and execute fails."""
    from core.sandbox import SandboxUnavailable

    monkeypatch.setenv("EDITFORGE_BWRAP", "/nonexistent/bwrap")
    _RecordingEndpoint.bodies = []
    model = ["backend=openai", "backend.chat=false", f"backend.base_url={endpoint}", "model.name=served"]
    for overrides, failing_stage in ((model, "generate"), (["model=reference"], "execute")):
        out = tmp_path / failing_stage
        common = ["benchmark=fixtures", "benchmark.limit=1", "sandbox.backend=bwrap", "gen.n=1", f"out={out}"]
        with pytest.raises(SandboxUnavailable, match="bubblewrap"):
            run_eval([*common, *overrides], stages=("start_sandboxes", "generate", "execute"))
        samples = (out / "samples.jsonl").read_text().splitlines() if (out / "samples.jsonl").exists() else []
        assert len(samples) == (0 if failing_stage == "generate" else 2)
    assert _RecordingEndpoint.bodies == []


def test_the_sandbox_begun_during_the_checks_is_taken_over_or_stopped(tmp_path, monkeypatch):
    """`eval.run` starts its interpreter's sandbox before the preflight checks: the run takes it over
    (one sandbox for the whole command), and a failed check stops it."""
    import eval.evaluation
    import eval.run
    from core.entry import run_app
    from eval.sandbox_start import start_sandbox

    started = []

    def counted(*args):
        started.append(start_sandbox(*args))
        return started[-1]

    monkeypatch.setattr(eval.run, "start_sandbox", counted)
    monkeypatch.setattr(eval.evaluation, "start_sandbox", counted)
    common = [
        "benchmark=fixtures",
        "benchmark.limit=1",
        "gen.n=1",
        "score.excess_code=false",
        "sandbox.workers=1",
    ]
    run_app(eval.run.APP, [*common, "model=reference", f"out={tmp_path / 'ok'}"])
    assert len(started) == 1 and json.loads((tmp_path / "ok" / "results.json").read_text())["metrics"]
    with pytest.raises(SystemExit):  # a replay file that does not exist: a failed check
        run_app(
            eval.run.APP,
            [*common, "model=replay", f"model.path={tmp_path / 'none.jsonl'}", f"out={tmp_path / 'x'}"],
        )
    assert len(started) == 2 and not eval.run._BEGUN
    with pytest.raises(RuntimeError, match="closed"):
        started[1].result().run("x = 1\n")


def test_a_begun_sandbox_without_the_toolchains_the_problems_need_is_stopped(tmp_path):
    from omegaconf import OmegaConf

    from eval.sandbox_start import Begun, start_sandbox

    cfg = compose_eval(["benchmark=fixtures", "benchmark.limit=1", "model=reference", f"out={tmp_path}"])
    config = to_eval_config(cfg)
    begun = Begun(start_sandbox(config.sandbox, None, ["go"], False), frozenset({"go"}))  # not Python's
    run = EvalRun(config, OmegaConf.to_container(cfg, resolve=True), begun)
    try:
        with pytest.raises(RuntimeError, match="closed"):
            begun.future.result().run("x = 1\n")
        assert run.sandbox() is not begun.future.result() and run.sandbox().run("x = 1\n").passed
    finally:
        run.close()
