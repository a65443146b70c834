"""The config schema and stages of `python -m data_pipeline.novel_api` (see `__main__.py`)."""

from __future__ import annotations

import contextlib
import json
import logging
import tarfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import CONFIG_DIR, register_schema
from core.entry import App
from core.errors import ConfigError, UserError
from core.hub import existing_path
from core.knowledge import CELL_PRESETS
from core.openai_client import EndpointConfig
from core.problems import read_records
from core.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from data_pipeline.novel_api.mining import SdistFindings

STAGES = ("discover", "bundles", "tasks", "validate", "corpus", "all")
TASK_PROMPT = CONFIG_DIR / "novel_api" / "task_prompt.yaml"
log = logging.getLogger("data_pipeline.novel_api")


@dataclass
class LLMConfig(EndpointConfig):
    """A served model (OpenAI-compatible) for LLM task generation."""

    model: str | None = None
    template: str = str(TASK_PROMPT)
    temperature: float = 0.2


@dataclass
class ProseConfig(EndpointConfig):
    """The optional LLM rewrite of each bundle's M prose (null model: the docstring's prose)."""

    model: str | None = None


@dataclass
class TasksConfig:
    generator: str = "deterministic"  # deterministic (offline) | llm (a served model) | both
    llm: LLMConfig = field(default_factory=LLMConfig)


@dataclass
class ValidateConfig(EndpointConfig):
    """C2 (the base model fails >= 2 of 3 samples without knowledge) and C3 (a strong model solves it
    with the full bundle) need served models; left null, they are skipped and recorded as such."""

    base_model: str | None = None
    strong_model: str | None = None
    samples: int = 3


@dataclass
class CorpusConfig:
    kinds: list[str] = field(default_factory=lambda: ["sft", "raft"])
    split: str = "task"  # task (the paper's task-level split) | api (ours) | library (needs holdout)
    test_fraction: float = 0.3  # of the tasks (split=task) or of the APIs (split=api)
    holdout: str | None = None  # a library: leave-one-library-out (its tasks are the test split)
    sft_cell: str = "Full"  # the SFT examples' knowledge: Full (the paper's), a preset, or random
    include: list[str] = field(default_factory=list)  # other libraries' built folders, merged in
    seed: int = 0
    # RAFT (Zhang et al. 2024): the oracle among k distractors, present in a fraction P of the rows
    distractors: int = 4
    oracle_fraction: float = 0.8
    negatives: str = "random"  # random | retrieved (BM25 hard negatives)


@dataclass
class NovelAPIConfig:
    stage: str = "all"
    library: str = ""
    import_name: str | None = None  # the module to import, when it differs from the distribution name
    old: str = ""  # a version, or a cutoff date (YYYY-MM-DD): the last release before it
    new: str = ""
    old_wheel: str | None = None  # install these files instead of the registry's
    new_wheel: str | None = None
    out: str = "data/novel/library"
    min_doc_words: int = 5
    # exported: a package whose __all__ names most of its submodules makes the others internal
    # (pandas.core.*): an API reachable only through them is dropped; all: every public path counts
    module_paths: str = "exported"
    # install each version with the dependencies of its release day (uv --exclude-newer); false: today's
    dated: bool = True
    # examples from the library's own tests and docs (the new version's sdist, from the index or this file)
    mine_examples: bool = True
    sdist: str | None = None
    # the library's repository (a folder, a git clone or a git URL) at the new version's tag: its tests,
    # docs and example scripts are mined too, for libraries whose sdist ships none
    examples: str | None = None
    example_timeout_s: float = 10.0
    prose: ProseConfig = field(default_factory=ProseConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    checks: ValidateConfig = field(default_factory=ValidateConfig)  # the validate stage (C2, C3)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # limits.timeout_s: 15 s per run

    def validate(self) -> None:
        if self.stage not in STAGES:
            raise ConfigError(f"stage={self.stage!r}: choose one of {STAGES}")
        if self.tasks.generator not in ("deterministic", "llm", "both"):
            raise ConfigError(f"tasks.generator={self.tasks.generator!r}: choose deterministic, llm or both")
        if self.tasks.generator != "deterministic" and not self.tasks.llm.model:
            raise ConfigError(
                f"tasks.generator={self.tasks.generator} needs tasks.llm.model=<served model name>"
            )
        unknown = sorted(set(self.corpus.kinds) - {"sft", "raft"})
        if unknown or not self.corpus.kinds:
            raise ConfigError(f"corpus.kinds={self.corpus.kinds}: choose from [sft, raft]")
        if not 0 < self.corpus.test_fraction < 1:
            raise ConfigError("corpus.test_fraction must be between 0 and 1")


register_schema("novel_api_schema", NovelAPIConfig)


def preflight(cfg: NovelAPIConfig) -> None:
    """What a run needs that `--cfg job` does not: the library and its versions, the files named."""
    if cfg.stage in ("discover", "all") and not (cfg.library and cfg.old and cfg.new):
        raise ConfigError(f"stage {cfg.stage} needs library=NAME old=VERSION|DATE new=VERSION")
    for key in ("old_wheel", "new_wheel", "sdist"):
        if getattr(cfg, key):
            existing_path(getattr(cfg, key), key)
    if cfg.examples and not ("://" in cfg.examples or cfg.examples.startswith("git@")):
        existing_path(cfg.examples, "examples")
    if cfg.stage not in ("discover", "all"):
        existing_path(str(Path(cfg.out) / "discovery.json"), "out", "run the discover stage first")


def run(cfg: NovelAPIConfig, resolved: dict[str, Any]) -> None:
    out = Path(cfg.out).absolute()  # the stages run tools in other folders (a venv's python, uv)
    started = time.monotonic()
    order = STAGES[:-1] if cfg.stage == "all" else (cfg.stage,)
    for stage in order:
        summary = STEPS[stage](cfg, out)
        log.info("%s: %s (%.0f s)", stage, json.dumps(summary), time.monotonic() - started)
        empty = empty_output(stage, summary)
        if empty and cfg.stage == "all" and stage != "corpus":  # no task can come out of the stages after
            raise UserError(f"{empty}; no task can survive, so the run stops here (see {out})")
        if empty:
            log.warning("%s", empty)


# What each stage makes, where its manifest counts it, and where its drop reasons are.
OUTPUTS = {
    "discover": (
        "kept APIs",
        lambda s: s["kept"],
        lambda s: {**s["filtered"], "install_errors": s.get("install_errors", 0)},
    ),
    "bundles": ("bundles", lambda s: s["kept"], lambda s: s["dropped"]),
    "tasks": ("tasks", lambda s: s["tasks"], lambda s: s["dropped"]),
    "validate": ("validated tasks", lambda s: s["kept"], lambda s: s["dropped"]),
}


def empty_output(stage: str, summary: dict[str, Any]) -> str | None:
    """One line when `stage` made nothing, with its top drop reasons; None otherwise."""
    if stage not in OUTPUTS:
        return None
    what, made, dropped = OUTPUTS[stage]
    if made(summary):
        return None
    if stage == "discover" and not summary["candidates"]:
        name, library = summary.get("import_name"), summary.get("library")
        if not summary["new_apis"]:
            return (
                f"discover: no kept APIs: the new version of {library} lists no public API under "
                f"import_name={name!r}; if its module is named otherwise than the distribution, pass "
                "import_name=<the module you import>"
            )
        return (
            f"discover: no kept APIs: the new version has no public API the old one lacked "
            f"({summary['new_apis']} public APIs, {summary['old_apis']} before, read from "
            f"import_name={name!r}); pick versions further apart, or pass the module you import as import_name"
        )
    reasons = sorted(((n, r) for r, n in dropped(summary).items() if n), reverse=True)[:3]
    why = ", ".join(f"{r} {n}" for n, r in reasons) or "no input"
    hint = HINTS.get((stage, reasons[0][1]) if reasons else (stage, ""), "")
    if stage == "bundles" and reasons and reasons[0][1] == "no_valid_example":
        examples = summary.get("examples", {})
        ran = {k: n for k, n in examples.items() if k != "examples_kept" and n}
        hint = (f"examples ran: {ran}; " if ran else "no example was found; ") + hint
    return f"{stage}: no {what} (top drop reasons: {why})" + (f"; {hint}" if hint else "")


# What could help, by (stage, its top drop reason)
HINTS = {
    ("bundles", "no_valid_example"): (
        "examples=PATH|GIT_URL mines the library's repository at the new version's tag when its sdist "
        "ships no tests or docs; example_timeout_s=N gives slow examples longer; bundles.json lists "
        "example_failures"
    ),
    ("tasks", "no_usable_example"): (
        "the examples never call the APIs at top level; tasks.generator=llm tasks.llm.model=NAME writes "
        "tasks from the bundles with a served model"
    ),
    (
        "tasks",
        "reference_fails",
    ): "tasks.json lists why references failed (reference_failures)",
}


def _discover(cfg: NovelAPIConfig, out: Path) -> dict[str, Any]:
    from data_pipeline.novel_api.discover import discover

    manifest = discover(
        cfg.library,
        cfg.old,
        cfg.new,
        out,
        cfg.import_name,
        Path(cfg.old_wheel) if cfg.old_wheel else None,
        Path(cfg.new_wheel) if cfg.new_wheel else None,
        cfg.min_doc_words,
        dated=cfg.dated,
        module_paths=cfg.module_paths,
    )
    return {**manifest["counts"], "library": cfg.library, "import_name": manifest.get("import_name")}


def _bundles(cfg: NovelAPIConfig, out: Path) -> dict[str, Any]:
    from data_pipeline.novel_api.bundles import build_bundles

    found, sdist, repository = _mined(cfg, out) if cfg.mine_examples else (None, None, None)
    manifest = build_bundles(
        out,
        cfg.example_timeout_s,
        mined=found.examples if found else None,
        namespace=found.namespace if found else None,
        origins={"sdist": sdist, "repository": repository},
    )
    if cfg.prose.model:
        from core.openai_client import OpenAIClient
        from data_pipeline.novel_api.prose import rewrite_prose
        from data_pipeline.novel_api.tasks import write_jsonl

        client = OpenAIClient(cfg.prose)
        bundles, manifest["prose"] = rewrite_prose(
            _read_jsonl(out / "bundles.jsonl"), client, cfg.prose.model
        )
        write_jsonl(bundles, out / "bundles.jsonl")
    return manifest


def _mined(cfg: NovelAPIConfig, out: Path) -> tuple[SdistFindings | None, str | None, dict[str, Any] | None]:
    """Examples from the new version's tests, docs and example scripts (its sdist, and the repository
    `examples=` names), its doctests' namespace, the sdist's name and where the repository's files
    came from (None where there was none)."""
    from data_pipeline.novel_api.mining import fetch_sdist, mine_files, read_repository, read_sdist

    discovery = json.loads((out / "discovery.json").read_text())
    files: dict[str, str] = {}
    if cfg.sdist:
        path: Path | None = Path(cfg.sdist)
    else:
        path = fetch_sdist(discovery["library"], discovery["new_version"], out / "sources")
    if path is not None:
        with contextlib.suppress(tarfile.TarError, zipfile.BadZipFile, OSError, EOFError):
            files = read_sdist(path)  # an unreadable archive gives nothing
    repository = None
    if cfg.examples:
        repo_files, repository = read_repository(cfg.examples, discovery["new_version"], out / "sources")
        files = {**files, **repo_files}  # the repository at the tag wins over the sdist's copy
    if path is None and repository is None:
        log.warning("bundles: no source distribution of %s %s found: examples come from docstrings only "
                    "(examples=PATH takes them from its repository)",
                    discovery["library"], discovery["new_version"])  # fmt: skip
        return None, None, None
    rows = [r for r in read_records(out / "apis.jsonl", ("qualname", "kind", "module")) if r.get("kept")]
    return mine_files(files, rows), path.name if path else None, repository


REQUIRED = {
    "bundles.jsonl": ("qualname", "library", "module", "E"),
    "tasks.jsonl": ("id", "qualname", "library", "description", "context", "reference", "tests", "paths"),
}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """A stage's input: every line an object with the keys the next stages read (else one line)."""
    if not path.is_file():
        raise UserError(f"{path} does not exist; run the stage that writes it first")
    return read_records(path, REQUIRED.get(path.name, ()))


def _sandbox(cfg: NovelAPIConfig, out: Path):
    python = json.loads((out / "discovery.json").read_text())["python"]["new"]
    return cfg.sandbox.open(python=python)


def _tasks(cfg: NovelAPIConfig, out: Path) -> dict[str, Any]:
    from data_pipeline.novel_api.tasks import build_tasks, drafts, write_jsonl

    bundles = _read_jsonl(out / "bundles.jsonl")
    generate = drafts
    if cfg.tasks.generator != "deterministic":
        from data_pipeline.novel_api.llm_tasks import LLMTaskGenerator, both_routes

        llm = LLMTaskGenerator.from_config(cfg.tasks.llm)
        generate = both_routes(drafts, llm) if cfg.tasks.generator == "both" else llm
    with _sandbox(cfg, out) as sandbox:
        tasks, manifest = build_tasks(bundles, sandbox, generate)
    python = json.loads((out / "discovery.json").read_text())["python"]["new"]
    tasks = [{**t, "python": python} for t in _split(tasks, cfg)]
    write_jsonl(tasks, out / "tasks.jsonl")
    (out / "tasks.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _validate(cfg: NovelAPIConfig, out: Path) -> dict[str, Any]:
    from data_pipeline.novel_api.tasks import write_jsonl
    from data_pipeline.novel_api.validate import validate_tasks

    tasks = _read_jsonl(out / "tasks.jsonl")
    bundles = {b["qualname"]: b for b in _read_jsonl(out / "bundles.jsonl")}
    with _sandbox(cfg, out) as sandbox:
        kept, manifest = validate_tasks(tasks, bundles, sandbox, cfg.checks)
    write_jsonl(kept, out / "tasks.jsonl")
    (out / "validate.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _corpus(cfg: NovelAPIConfig, out: Path) -> dict[str, Any]:
    from data_pipeline.novel_api.corpus import build_corpora
    from data_pipeline.novel_api.raft import DocumentPool, RAFTConfig
    from data_pipeline.novel_api.tasks import write_jsonl

    c = cfg.corpus
    if c.sft_cell != "random" and c.sft_cell not in CELL_PRESETS:
        raise UserError(f"corpus.sft_cell={c.sft_cell!r}: choose random or one of {sorted(CELL_PRESETS)}")
    tasks, bundles = _merged(out, [Path(p) for p in c.include])
    if c.holdout is not None and c.holdout not in {t["library"] for t in tasks}:
        raise UserError(
            f"corpus.holdout={c.holdout!r} has no tasks here; libraries: {sorted({t['library'] for t in tasks})}"
        )
    tasks = _split(tasks, cfg)
    write_jsonl(tasks, out / "tasks.jsonl")  # the split the corpus and the evaluation agree on
    write_jsonl(list(bundles.values()), out / "bundles.jsonl")
    distractors = c.distractors
    most = max(0, DocumentPool(bundles).distinct_texts - 2)  # k+1 distinct texts besides the oracle's
    if "raft" in c.kinds and distractors > most:
        log.warning(
            "corpus: %d bundles allow at most %d RAFT distractors, not corpus.distractors=%d; using %d "
            "(add libraries with corpus.include for more)", len(bundles), most, distractors, most,
        )  # fmt: skip
        distractors = most
    raft = RAFTConfig(
        distractors=distractors, oracle_fraction=c.oracle_fraction, negatives=c.negatives, seed=c.seed
    )
    try:
        return build_corpora(out, list(c.kinds), tasks, bundles, c.seed, raft, c.sft_cell)
    except ValueError as err:  # RAFT: fewer distinct bundles than distractors
        raise UserError(str(err)) from None


def _split(tasks: list[dict], cfg: NovelAPIConfig) -> list[dict]:
    from data_pipeline.novel_api.corpus import assign_splits

    c = cfg.corpus
    try:
        return assign_splits(tasks, c.test_fraction, c.seed, c.holdout, c.split)
    except ValueError as err:
        raise UserError(str(err)) from err


def _merged(out: Path, include: list[Path]) -> tuple[list[dict], dict[str, dict]]:
    """This folder's tasks and bundles plus those of `include` (leave-one-library-out corpora)."""
    tasks, bundles = [], {}
    for folder in [out, *include]:
        for needed in ("tasks.jsonl", "bundles.jsonl"):
            existing_path(str(folder / needed), "corpus.include", "build each library's folder first")
        tasks += [t for t in _read_jsonl(folder / "tasks.jsonl") if t["id"] not in {x["id"] for x in tasks}]
        bundles.update({b["qualname"]: b for b in _read_jsonl(folder / "bundles.jsonl")})
    return tasks, bundles


STEPS = {
    "discover": _discover,
    "bundles": _bundles,
    "tasks": _tasks,
    "validate": _validate,
    "corpus": _corpus,
}
APP = App(
    "novel_api",
    NovelAPIConfig,
    run=run,
    preflight=preflight,
    interrupted="the finished stages' files and the installed versions are in {out}; the same command runs "
    "the stages again, reusing the installed versions",
)
