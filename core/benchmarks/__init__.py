"""Benchmarks as `Problem` lists, and the one registry of benchmark kinds.

Evaluation and decontamination both load benchmarks here, so training data is checked against
exactly the texts the model is shown. `KINDS` maps a kind's name to its one registered `Kind`:
its options dataclass (`BenchmarkOptions` plus its own fields), its loader, and, once evaluation
asks for it, its evaluation (execute, verdicts, score, report: `eval/benchmarks/`, which this
package never imports). Built-in kinds are declared below; an installed package declares more
under the entry-point group `editforge.benchmarks` (`name = "pkg.module:KIND"`, an object with
`name`, `options`, `load` and the evaluation's methods), found on the first lookup of a name
not declared here, so decontamination and evaluation see the same kinds. `options_from` builds
a kind's options from a config, strictly. `path: null` is a benchmark's default source (the hub
for CanItEdit and EDIT-Bench, the copy shipped in `core/data/` for HumanEvalFix,
`fixtures.jsonl` for the fixtures; the built benchmarks need a folder), `hub:ID` names the hub,
anything else is a local path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.benchmarks import apiupdate, canitedit, editbench, humanevalfix, novelapi
from core.benchmarks.options import BenchmarkOptions, to_options
from core.errors import ConfigError
from core.plugins import EntryPoints
from core.problems import Problem


@dataclass
class Kind:
    """A benchmark kind: its options schema and loader (what decontamination reads), and its
    evaluation (`eval.benchmarks.BenchmarkKind`: execute, score, report), which evaluation sets on
    first use for a built-in kind and a plugin brings with it."""

    name: str
    options: type[BenchmarkOptions]
    load: Callable[[Any], list[Problem]]
    evaluation: Any = None


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("canitedit", canitedit.CanItEditOptions, lambda o: canitedit.load_canitedit(o.path)),
        Kind("fixtures", canitedit.FixturesOptions, canitedit.load_fixtures),
        Kind("humanevalfix", humanevalfix.HumanEvalFixOptions, humanevalfix.load),
        Kind("apiupdate", apiupdate.ApiUpdateOptions, apiupdate.load),
        Kind("novelapi", novelapi.NovelApiOptions, novelapi.load),
        Kind("editbench", editbench.EditBenchOptions, editbench.load),
    )
}
ENTRY_POINTS = "editforge.benchmarks"
PLUGINS = EntryPoints(ENTRY_POINTS, "a benchmark kind")


def register(evaluation: Any) -> Kind:
    """Register a kind from its evaluation object (`name`, `options`, `load`, execute/score/report):
    what a plugin's entry point names, or what code registers itself; a name already registered is
    replaced. An object whose `load` reads the registry (`reads_the_registry`: the evaluation
    contract's default) keeps the loader registered under its name."""
    name, options = getattr(evaluation, "name", None), getattr(evaluation, "options", None)
    if not (isinstance(name, str) and isinstance(options, type) and issubclass(options, BenchmarkOptions)):
        raise ConfigError(
            f"{evaluation!r} is not a benchmark kind: it needs a str `name` and BenchmarkOptions `options`"
        )
    load = evaluation.load
    if getattr(load, "reads_the_registry", False):
        if name not in KINDS:
            raise ConfigError(f"benchmark kind {name!r} has no loader: define load(options)")
        load = KINDS[name].load
    KINDS[name] = Kind(name, options, load, evaluation)
    return KINDS[name]


def discover() -> None:
    """Register the kinds installed packages declare (once per process); a plugin replaces a
    built-in of its name, never a kind code registered."""
    PLUGINS.load(register, skip=lambda name: name in KINDS and KINDS[name].evaluation is not None)


def kind_of(name: str, key: str = "benchmark") -> Kind:
    """The registered kind `name` (installed plugins included); a one-line error naming the kinds."""
    if name not in KINDS:
        discover()
    if name not in KINDS:
        raise ConfigError(f"{key}.name={name!r}: choose one of {tuple(KINDS)}")
    return KINDS[name]


@dataclass
class Benchmark:
    name: str
    problems: list[Problem]

    @property
    def splits(self) -> list[str]:
        seen: dict[str, None] = {}
        for p in self.problems:
            seen.update(dict.fromkeys(p.splits))
        return list(seen)

    def programs(self) -> list[str]:
        """Every program a problem shows the model or expects back: `before` and `after`."""
        return [text for p in self.problems for text in (p.before, p.after) if text.strip()]

    def instructions(self) -> list[str]:
        """Every instruction the model is shown, all splits."""
        return [text for p in self.problems for text in p.instructions.values() if text.strip()]


def options_from(plain: Mapping[str, Any] | BenchmarkOptions, key: str = "benchmark") -> BenchmarkOptions:
    """The options of the benchmark `plain` names, strictly (an option of another kind fails)."""
    if isinstance(plain, BenchmarkOptions):
        return plain
    name = plain.get("name", BenchmarkOptions.name)
    return to_options(kind_of(str(name), key).options, plain, key)


def load_source(options: BenchmarkOptions) -> Benchmark:
    return Benchmark(options.name, kind_of(options.name).load(options))


def load_benchmark(name: str, path: str | None = None, **options: Any) -> Benchmark:
    """`load_benchmark("humanevalfix", languages=["js"])`: a benchmark by name and options."""
    return load_source(options_from({"name": name, "path": path, **options}))


def load_every_variant(options: BenchmarkOptions) -> list[Benchmark]:
    """The benchmark as each of its variants shows it (HumanEvalFix: fix, fixtests, fixdocs)."""
    return [load_source(v) for v in options.variants()]
