"""The novel-API benchmark: tasks that must call an API a model cannot know, scored per knowledge cell.

A built folder (`python -m data_pipeline.novel_api all ...`) holds `tasks.jsonl` (one task per
row: a context with a `# TODO` line to complete, a description that never names the API, the
reference, the execute-then-assert tests, the API's public paths and the reference's recorded
calls), `bundles.jsonl` (the S/E/M knowledge per API) and `discovery.json` (the interpreter of
the library's new version). Each task becomes one `Problem` whose splits are the knowledge
cells (`core/knowledge.py`): the instruction is the description plus that cell's knowledge
text, from the task's own bundle (`retrieval=oracle`) or the bundle a retriever finds for the
description (`bm25`, `dense`). `bundle=stripped` is the paper's bundle-stripped evaluation
(Appendix E.5): no bundle in the prompt at all, so only what a model's parameters absorbed can
help; `bundle=masked`, a variant of ours, keeps the cell's knowledge with the API's names written
`<API>`.

Programs run as `novelapi_spy.py`'s source plus one call: the spy wraps every path of the API,
the candidate and the tests run, and the calls are reported (`read_spy`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from core.benchmarks.options import BenchmarkOptions
from core.errors import ConfigError
from core.knowledge import CELL_PRESETS, cell_parts, render_knowledge
from core.problems import BenchmarkError, Problem, check_unique, read_records
from core.sandbox import recording
from core.sandbox.reports import last_report

SPY_SOURCE = (
    Path(recording.__file__).read_text() + (Path(__file__).resolve().parent / "novelapi_spy.py").read_text()
)
TASK_FIELDS = ("id", "qualname", "library", "description", "context", "reference", "tests", "paths")
RETRIEVALS = ("oracle", "bm25", "dense")
BUNDLES = ("full", "stripped", "masked")
# Definitions of the companion metrics (eval/novelapi/metrics.py): the paper's reading first.
API_ACC = ("static", "spy")  # the code selects the target | the spy recorded a call
PARAM_CORR = ("binding", "values")  # parameters and argument kinds as bound | argument values


@dataclass
class NovelApiOptions(BenchmarkOptions):
    """Which knowledge cells (None: the study's grid), where the knowledge comes from (oracle: the
    task's own bundle; bm25 | dense: the retriever's top bundle for the description), full or
    stripped (no bundle, the paper's E.5) or masked (the API's names written <API>), the dense
    encoder, a library filter, and which definition API_acc and Param_corr use (`API_ACC`,
    `PARAM_CORR`: the paper's reading by default, the spy-based and value-based ones by name)."""

    name: str = "novelapi"
    cells: list[str] | None = None
    retrieval: str = "oracle"
    bundle: str = "full"
    retriever_model: str | None = None
    libraries: list[str] | None = None
    api_acc: str = "static"
    param_corr: str = "binding"
    built_by = "python -m data_pipeline.novel_api"

    def validate(self, key: str = "benchmark") -> None:
        super().validate(key)
        if self.retrieval not in RETRIEVALS:
            raise ConfigError(f"{key}.retrieval={self.retrieval!r}: choose one of {RETRIEVALS}")
        if self.bundle not in BUNDLES:
            raise ConfigError(f"{key}.bundle={self.bundle!r}: choose one of {BUNDLES}")
        if self.api_acc not in API_ACC:
            raise ConfigError(f"{key}.api_acc={self.api_acc!r}: choose one of {API_ACC}")
        if self.param_corr not in PARAM_CORR:
            raise ConfigError(f"{key}.param_corr={self.param_corr!r}: choose one of {PARAM_CORR}")
        if self.retrieval == "dense" and not self.retriever_model:
            raise ConfigError(f"{key}.retrieval=dense needs {key}.retriever_model=<hub id or folder>")


@dataclass(frozen=True)
class NovelApiPayload:
    qualname: str
    paths: tuple[str, ...]  # every public path of the API (the spy wraps each)
    library: str
    signature: str | None
    reference_calls: tuple[dict[str, Any], ...]
    level: int | None
    python: str | None  # the interpreter of the library's new version
    retrieved: str  # the bundle the knowledge came from
    use: str = "call"  # call | type: see `USES`


# The file name the spy compiles a completion under: pass it as the sandbox's `candidate_file`.
CANDIDATE_FILE = "<candidate>"


USES = ("call", "type")  # how a task uses its API: calls it, or uses a class as a type (annotations)


def program(code: str, paths: list[str], absent: bool = False, use: str = "call") -> str:
    """The text the sandbox runs for a completion `code` of a task, with the task's tests passed
    apart (`candidate_file=CANDIDATE_FILE`, `channel=True`); `absent`: with the API taken away,
    the run that checks a pass needed it; `use`: one of `USES` (the spy's `novelapi_main`)."""
    if use not in USES:
        raise ValueError(f"use={use!r}: choose one of {USES}")
    return f"{SPY_SOURCE}\n\nnovelapi_main({list(paths)!r}, {code!r}, {absent!r}, {use!r})\n"


def read_spy(channel: str) -> dict[str, Any] | None:
    """The spy's report (``ExecutionResult.channel``), or None when the run never got that far."""
    return last_report(channel, "spy")


def instruction(task: dict[str, Any], knowledge: str) -> str:
    ask = "Complete the code: replace the `# TODO` line so that it does what the description says."
    text = f"{task['description']}\n\n{ask}"
    return f"{text}\n\nDocumentation that may help:\n\n{knowledge}" if knowledge else text


def load_novelapi(
    path: str | None,
    cells: list[str] | None = None,
    retrieval: str = "oracle",
    bundle_mode: str = "full",
    retriever_model: str | None = None,
    libraries: list[str] | None = None,
) -> list[Problem]:
    """Problems of a built folder, one per task, a split per knowledge cell; ``bundle_mode`` one of
    `BUNDLES` (stripped: no knowledge in any cell; masked: the API's names written <API>)."""
    if path is None:
        raise BenchmarkError(
            "benchmark=novelapi needs benchmark.path=<folder written by python -m data_pipeline.novel_api>"
        )
    folder = Path(path)
    tasks = [r for r in read_records(folder / "tasks.jsonl", TASK_FIELDS) if r.get("split", "test") == "test"]
    bundles = {r["qualname"]: r for r in read_records(folder / "bundles.jsonl", ("qualname",))}
    discovery = (
        json.loads((folder / "discovery.json").read_text()) if (folder / "discovery.json").is_file() else {}
    )
    chosen = cells or list(CELL_PRESETS)
    try:
        parts = {cell: cell_parts(cell) for cell in chosen}
    except ValueError as err:
        raise BenchmarkError(f"benchmark.cells: {err}") from err
    if retrieval not in RETRIEVALS:
        raise BenchmarkError(f"benchmark.retrieval={retrieval!r}: choose one of {RETRIEVALS}")
    if libraries:
        tasks = [t for t in tasks if t["library"] in libraries]
    retrieved = _retrieve(tasks, bundles, retrieval, retriever_model)
    default_python = (discovery.get("python") or {}).get("new")
    problems = []
    for task in tasks:
        python = _interpreter(task.get("python"), default_python, folder)
        bundle = bundles.get(retrieved[task["id"]])
        problems.append(
            Problem(
                id=str(task["id"]),
                name=f"{task['qualname']} L{task.get('level', '?')}",
                before=task["context"],
                after=task["reference"],
                tests=task["tests"],
                instructions={
                    cell: instruction(
                        task,
                        render_knowledge(bundle, parts[cell], bundle_mode == "masked")
                        if bundle and bundle_mode != "stripped"
                        else "",
                    )
                    for cell in chosen
                },
                payload=NovelApiPayload(
                    qualname=task["qualname"],
                    paths=tuple(task["paths"]),
                    library=task["library"],
                    signature=task.get("signature"),
                    reference_calls=tuple(task.get("reference_calls", [])),
                    level=task.get("level"),
                    python=python,
                    retrieved=retrieved[task["id"]],
                    use=_use(task),
                ),
            )
        )
    return check_unique(problems, str(folder))


def _use(task: dict[str, Any]) -> str:
    use = task.get("use", "call")
    if use not in USES:
        raise BenchmarkError(f"task {task['id']}: use={use!r}, expected one of {USES}")
    return use


def _interpreter(task_python: str | None, default: str | None, folder: Path) -> str | None:
    """The library version's interpreter; a moved folder finds its own `envs/` again."""
    for candidate in (task_python, default):
        if candidate and Path(candidate).exists():
            return candidate
    for candidate in (task_python, default):
        if candidate and "envs" in Path(candidate).parts:
            relocated = folder / Path(*Path(candidate).parts[Path(candidate).parts.index("envs") :])
            if relocated.exists():
                return str(relocated)
    if task_python or default:
        raise BenchmarkError(
            f"{folder}: the library's interpreter {task_python or default} is missing; rebuild the "
            "environments with python -m data_pipeline.novel_api discover ... out=" + str(folder)
        )
    return None


def _retrieve(
    tasks: list[dict], bundles: dict[str, dict], retrieval: str, model: str | None
) -> dict[str, str]:
    """The bundle each task's knowledge comes from: its own, or the retriever's top hit."""
    if retrieval == "oracle":
        return {t["id"]: t["qualname"] for t in tasks}
    from core.retrieval import document_text, make_retriever

    ids = sorted(bundles)
    retriever = make_retriever(retrieval, [(i, document_text(bundles[i])) for i in ids], model=model)
    # the retriever's document ids are the bundles' keys, qualnames (str)
    return {
        t["id"]: cast(str, (retriever.search(t["description"], 1) or [(t["qualname"], 0.0)])[0][0])
        for t in tasks
    }


def load(options: NovelApiOptions) -> list[Problem]:
    return load_novelapi(
        options.path,
        options.cells,
        options.retrieval,
        options.bundle,
        options.retriever_model,
        options.libraries,
    )
