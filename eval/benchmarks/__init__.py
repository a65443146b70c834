"""Benchmarks: CanItEdit, HumanEvalFix and the project's own fixtures, as `Problem` lists.

`load_benchmark(name, path, languages)` returns the problems and the splits to score.
CanItEdit's splits are its instruction kinds (descriptive, lazy); HumanEvalFix's are
languages (and it has variants: fix, fixtests, fixdocs); the fixtures follow CanItEdit's schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eval.benchmarks.canitedit import load_canitedit
from eval.benchmarks.humanevalfix import load_humanevalfix
from eval.problems import Problem

FIXTURES = Path(__file__).resolve().parent / "fixtures.jsonl"


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


def load_benchmark(
    name: str, path: str | None = None, languages: list[str] | None = None, variant: str = "fixtests"
) -> Benchmark:
    """`variant` (fix | fixtests | fixdocs) is HumanEvalFix's; the other benchmarks have none."""
    if name == "canitedit":
        return Benchmark(name, load_canitedit(path))
    if name == "fixtures":
        return Benchmark(name, load_canitedit(path or str(FIXTURES)))
    if name == "humanevalfix":
        return Benchmark(name, load_humanevalfix(path, languages or ["python"], variant))
    raise ValueError(f"unknown benchmark {name!r}; choose canitedit, humanevalfix or fixtures")
