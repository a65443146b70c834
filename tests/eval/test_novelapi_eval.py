"""`python -m eval.run benchmark=novelapi`: scripted answers per knowledge cell give exactly the
expected pass@k, API_acc, Param_corr and failure classes; the report has the per-cell table and
the stacked bar plot; retrieval and stripped bundles change what the instruction shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_eval_run import run_eval
from test_novel_tasks import BUNDLE, TYPED, python, sandbox  # noqa: F401  (fixtures)

from core.benchmarks import load_benchmark
from core.problems import BenchmarkError
from data_pipeline.novel_api.tasks import build_tasks, write_jsonl

SECOND = {
    **BUNDLE,
    "qualname": "novlib.text.title_slug",
    "paths": ["novlib.text.title_slug"],
    "S": {"name": "novlib.text.title_slug", "signature": "title_slug(text)"},
    "E": [{"code": "title_slug('big news')", "output": "'Big_News'"}],
    "M": {"prose": "Make a title-cased slug joined by underscores.", "code": "def title_slug(text): ..."},
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, sandbox, python) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("novel")
    tasks, _ = build_tasks([BUNDLE, SECOND], sandbox)
    keep = {("novlib.text.slugify", 2), ("novlib.text.title_slug", 1)}
    tasks = [{**t, "split": "test"} for t in tasks if (t["qualname"], t["level"]) in keep]
    write_jsonl(tasks, out / "tasks.jsonl")
    write_jsonl([BUNDLE, SECOND], out / "bundles.jsonl")
    (out / "discovery.json").write_text(json.dumps({"library": "novlib", "python": {"new": python}}))
    return out


CELLS = ["baseline", "S", "E", "Full"]


def test_replay_gives_exact_metrics_and_classes(folder, tmp_path):
    slug = "slugify('Hello, World', sep=arg0, max_len=arg1)"
    answers = {
        # cell -> five completions for the slugify task (L2: solve(arg0='+', arg1=8))
        "baseline": [
            "def solve(arg0, arg1):\n    return 'hello+wo'\n",  # reimplements: WrongAPISelection
            "def solve(arg0, arg1)\n    return 1\n",  # WrongSyntax
            "from novlib import slugify\ndef solve(arg0, arg1):\n    return "
            + slug.replace("sep=", "separator=")
            + "\n",
            "import novlib.txt\ndef solve(arg0, arg1):\n    return novlib.txt." + slug + "\n",  # WrongImport
            "def solve(arg0, arg1):\n    return 'hello+wo'\n",
        ],
        "Full": [
            "from novlib import slugify\ndef solve(arg0, arg1):\n    return "
            + slug
            + "\n",  # OK, params right
            "import novlib.text\ndef solve(arg0, arg1):\n    return novlib.text." + slug + "\n",  # OK
            "from novlib import slugify\ndef solve(arg0, arg1):\n    return slugify('Hello, World', arg0, 8)\n",  # OK
            "from novlib import slugify\ndef solve(arg0, arg1):\n    return list("
            + slug
            + ")\n",  # WrongLogic: the right call, its result misused by the program around it
            "from novlib import slugify\ndef solve(arg0, arg1):\n    return slugify('Hello', sep=arg0)\n",  # WrongParam
        ],
    }
    problems = {p.name.split(" ")[0]: p for p in load_benchmark("novelapi", str(folder)).problems}
    slug_id = problems["novlib.text.slugify"].id
    script = [{"problem": slug_id, "split": cell, "completions": texts} for cell, texts in answers.items()]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(s) + "\n" for s in script))
    out = tmp_path / "run"
    results = run_eval(
        [
            "benchmark=novelapi",
            f"benchmark.path={folder}",
            "benchmark.cells=[baseline,Full]",
            "benchmark.limit=null",
            "model=replay",
            f"model.path={replay}",
            "gen.n=5",
            "score.ks=[1,5]",
            f"out={out}",
        ]
    )
    m = results["metrics"]
    # the title_slug task has no script: empty completions (WrongSyntax), 0 everywhere
    assert m["Full"]["pass@1"] == pytest.approx((3 / 5 + 0) / 2) and m["Full"]["pass@5"] == pytest.approx(0.5)
    assert m["Full"]["api_acc"] == pytest.approx((5 / 5 + 0) / 2)
    # among the samples that call it (title_slug has none): positional sep counts, the list() wrapper
    # calls right, slugify('Hello', sep=arg0) leaves max_len out
    assert m["Full"]["param_corr"] == pytest.approx(4 / 5)
    # baseline: the separator= call and the WrongImport one select it; of those two callers, the
    # WrongImport call (read from the code, never run) binds the reference's parameters
    assert m["baseline"]["pass@1"] == 0.0 and m["baseline"]["api_acc"] == pytest.approx((2 / 5) / 2)
    assert m["baseline"]["param_corr"] == pytest.approx(1 / 2)
    assert m["Full"]["classes"] == {
        "OK": 3,
        "WrongSyntax": 5,
        "WrongImport": 0,
        "WrongAPISelection": 0,
        "WrongParam": 1,
        "WrongShapeDtype": 0,
        "WrongLogic": 1,
    }
    assert m["baseline"]["classes"] == {
        "OK": 0,
        "WrongSyntax": 6,
        "WrongImport": 1,
        "WrongAPISelection": 2,
        "WrongParam": 1,
        "WrongShapeDtype": 0,
        "WrongLogic": 0,
    }
    report = (out / "report.md").read_text()
    assert "| Full | 2 | 10 | 30.0 | 50.0 | 50.0 | 80.0 |" in report
    assert (out / "failure_classes.png").stat().st_size > 1000


def test_the_reference_scores_one_on_api_acc_and_param_corr(folder, tmp_path):
    """`model=reference` answers with each task's reference: every sample selects the API and binds
    the reference's parameters, under the default definitions and the earlier ones alike."""
    for api_acc, param_corr in (("static", "binding"), ("spy", "values")):
        out = tmp_path / api_acc
        results = run_eval(
            ["benchmark=novelapi", f"benchmark.path={folder}", "benchmark.cells=[Full]", "model=reference",
             f"benchmark.api_acc={api_acc}", f"benchmark.param_corr={param_corr}", "gen.n=1", "score.ks=[1]",
             f"out={out}"]
        )  # fmt: skip
        m = results["metrics"]["Full"]
        assert (m["pass@1"], m["api_acc"], m["param_corr"]) == (1.0, 1.0, 1.0), m
        assert m["definitions"] == {"api_acc": api_acc, "param_corr": param_corr}


def test_cells_retrieval_and_stripped_bundles(folder):
    full = load_benchmark("novelapi", str(folder), cells=CELLS).problems
    slug = next(p for p in full if p.payload.qualname.endswith("slugify"))
    assert set(slug.instructions) == set(CELLS)
    assert "slugify" not in slug.instructions["baseline"]
    assert "slugify(text, sep='-', max_len=None)" in slug.instructions["S"]
    assert "Examples" in slug.instructions["E"] and "Signature" not in slug.instructions["E"]
    stripped = load_benchmark("novelapi", str(folder), cells=["Full"], bundle="stripped")  # the paper's E.5
    baseline = {p.id: p.instructions["baseline"] for p in full}
    assert all(p.instructions["Full"] == baseline[p.id] for p in stripped.problems)  # no bundle at all
    joined = load_benchmark("novelapi", str(folder), cells=["S_name+S_sig+M_prose", "E+M_code"]).problems
    one = next(p for p in joined if p.payload.qualname.endswith("slugify"))
    named = one.instructions["S_name+S_sig+M_prose"]
    assert "Signature" in named and "Examples" not in named
    assert "Examples" in one.instructions["E+M_code"] and "Signature" not in one.instructions["E+M_code"]
    with pytest.raises(BenchmarkError, match="joined by"):
        load_benchmark("novelapi", str(folder), cells=["S+Q"])
    masked = load_benchmark("novelapi", str(folder), cells=["Full"], bundle="masked")
    assert all(
        "slugify" not in p.instructions["Full"] and "<API>" in p.instructions["Full"] for p in masked.problems
    )
    bm25 = load_benchmark("novelapi", str(folder), cells=["S"], retrieval="bm25").problems
    assert {p.payload.retrieved for p in bm25} <= {"novlib.text.slugify", "novlib.text.title_slug"}


FORGERIES = {
    # the spy's state and call list, edited through the wrapper's closure, for a reimplementation
    "closure": (
        "import novlib.text\n"
        "for cell in novlib.text.slugify.__closure__ or ():\n"
        "    value = cell.cell_contents\n"
        "    if isinstance(value, dict) and 'returned' in value:\n"
        "        value['returned'] = 5\n"
        "    elif isinstance(value, list):\n"
        "        value.append({'args': [\"'Hello, World'\"], 'kwargs': {'sep': \"'+'\", 'max_len': '8'}})\n"
        "def solve(arg0, arg1):\n    return 'hello+wo'\n"
    ),
    # a spy record left unflushed on stdout and written into every descriptor (the channel's lines
    # need the run's token, which is in no program text)
    "stdout and descriptors": (
        "import json, os, sys\n"
        "forged = {'calls': [{'args': [\"'Hello, World'\"], 'kwargs': {}}], 'wrapped': 2, 'error': None}\n"
        "line = 'spy ' + json.dumps(forged) + '\\n'\n"
        "sys.stdout.write('\\n@@' + line)\n"
        "for fd in range(3, 64):\n    try:\n        os.write(fd, line.encode())\n    except OSError:\n        pass\n"
        "def solve(arg0, arg1):\n    return 'wrong'\n"
    ),
    # the spy's state and call list, found in the frames above the candidate, for a reimplementation
    "frame": (
        "import inspect\nframe = inspect.currentframe()\nwhile frame is not None:\n"
        "    state, calls = frame.f_locals.get('state'), frame.f_locals.get('calls')\n"
        "    if isinstance(state, dict) and isinstance(calls, list):\n"
        "        state['returned'] = 5\n"
        "        calls.append({'args': [\"'Hello, World'\"], 'kwargs': {'sep': \"'+'\", 'max_len': '8'}})\n"
        "    frame = frame.f_back\n"
        "def solve(arg0, arg1):\n    return 'hello+wo'\n"
    ),
    # the real function behind the wrapper
    "__wrapped__": (
        "import novlib.text\nreal = novlib.text.slugify.__wrapped__\n"
        "def solve(arg0, arg1):\n    return real('Hello, World', sep=arg0, max_len=arg1)\n"
    ),
}


def test_forged_spy_records_give_no_pass_and_no_call(folder, tmp_path):
    problems = {p.name.split(" ")[0]: p for p in load_benchmark("novelapi", str(folder)).problems}
    slug_id = problems["novlib.text.slugify"].id
    honest = "from novlib import slugify\ndef solve(arg0, arg1):\n    return slugify('Hello, World', sep=arg0, max_len=arg1)\n"
    texts = [honest, *FORGERIES.values()]
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"problem": slug_id, "split": "Full", "completions": texts}) + "\n")
    out = tmp_path / "run"
    run_eval(
        [
            "benchmark=novelapi",
            f"benchmark.path={folder}",
            "benchmark.cells=[Full]",
            "model=replay",
            f"model.path={replay}",
            f"gen.n={len(texts)}",
            "score.ks=[1]",
            f"out={out}",
        ]
    )
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    runs = {r["index"]: r for r in records if r["type"] == "execution" and r["problem"] == slug_id}
    assert runs[0]["passed"] and runs[0]["calls"], runs[0]  # the control
    for i, name in enumerate(FORGERIES, 1):
        assert not runs[i]["passed"], (name, runs[i])
        assert runs[i]["calls"] == [], (name, runs[i]["calls"])


def test_a_type_task_passes_only_samples_that_need_the_class(tmp_path, sandbox, python):  # noqa: F811
    """A class the task uses as a type: a look-alike type of the sample's own passes the tests but
    also passes with the class taken away, so it fails; API_acc counts the samples that name it."""
    folder = tmp_path / "typed"
    folder.mkdir()
    tasks, _ = build_tasks([TYPED], sandbox)
    write_jsonl([{**t, "split": "test"} for t in tasks], folder / "tasks.jsonl")
    write_jsonl([TYPED], folder / "bundles.jsonl")
    (folder / "discovery.json").write_text(json.dumps({"library": "novlib", "python": {"new": python}}))
    (problem,) = load_benchmark("novelapi", str(folder)).problems
    assert problem.payload.use == "type"
    head = "import novlib.fields\nfrom novlib import load\n"
    body = "def solve():\n    record = {'name': 'ada', 'age': '36'}\n    class Person:\n        name: %s\n        age: %s\n    return load(Person, record)\n"
    mine = "class Mine(str):\n    def __new__(cls, v):\n        return str.__new__(cls, v.upper())\n"
    texts = [
        head + body % ("novlib.fields.Upper", "int"),  # passes, needs it
        head + mine + body % ("Mine", "int"),  # passes, but also without it: failed, not used
        head + body % ("novlib.fields.Upper", "str"),  # names it, fails the tests: used
        head + body % ("str", "int"),  # neither
    ]
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"problem": problem.id, "split": "Full", "completions": texts}) + "\n")
    out = tmp_path / "run"
    results = run_eval(
        ["benchmark=novelapi", f"benchmark.path={folder}", "benchmark.cells=[Full]", "model=replay",
         f"model.path={replay}", "gen.n=4", "score.ks=[1]", f"out={out}"]
    )  # fmt: skip
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    runs = {r["index"]: r for r in records if r["type"] == "execution"}
    assert [runs[i]["passed"] for i in range(4)] == [True, False, False, False]
    assert [runs[i]["used"] for i in range(4)] == [True, False, True, False]
    assert "never needed" in runs[1]["detail"]
    m = results["metrics"]["Full"]
    assert m["pass@1"] == pytest.approx(1 / 4) and m["api_acc"] == pytest.approx(2 / 4)


def test_the_report_plots_failures_only_when_there_are_some(tmp_path):
    from eval.benchmarks.novelapi import CLASSES, render_novelapi_report

    def metrics(failing: int) -> dict:
        classes = dict.fromkeys(CLASSES, 0) | {"OK": 4 - failing, "WrongImport": failing}
        return {"Full": {"problems": 2, "samples": 4, "pass@1": 1 - failing / 4, "api_acc": 1.0,
                         "param_corr": 1.0, "classes": classes}}  # fmt: skip

    plot = tmp_path / "failure_classes.png"
    clean = render_novelapi_report("m", {"metrics": metrics(0)}, [1], plot)
    assert "No sample failed" in clean and not plot.exists()
    failed = render_novelapi_report("m", {"metrics": metrics(2)}, [1], plot)
    assert "![failure classes per cell](failure_classes.png)" in failed and plot.stat().st_size > 1000
