"""CanItEdit (nuprl/CanItEdit on the hub, or a local jsonl in its schema), and the project's own
fixtures in the same schema (`core/benchmarks/fixtures.jsonl`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.benchmarks.options import BenchmarkOptions
from core.hub import is_hub, load_hub_dataset
from core.problems import Problem, check_unique, problem_from_canitedit, read_jsonl

HUB_ID = "nuprl/CanItEdit"
FIXTURES = Path(__file__).resolve().parent / "fixtures.jsonl"


@dataclass
class CanItEditOptions(BenchmarkOptions):
    name: str = "canitedit"
    hub_default = True


@dataclass
class FixturesOptions(BenchmarkOptions):
    name: str = "fixtures"


def load_canitedit(path: str | None = None) -> list[Problem]:
    """Problems from `path` (jsonl), or from the hub's test split (`None` or `hub:ID`)."""
    if path is not None and not is_hub(path):
        records = read_jsonl(Path(path))
        return check_unique([problem_from_canitedit(r, where) for where, r in records], path)
    ref = path or f"hub:{HUB_ID}"
    ds = load_hub_dataset(ref, None, "test", "benchmark.path")
    name = ref.removeprefix("hub:")
    return check_unique([problem_from_canitedit(dict(r), f"{name}[{i}]") for i, r in enumerate(ds)], name)


def load_fixtures(options: FixturesOptions) -> list[Problem]:
    return load_canitedit(options.path or str(FIXTURES))
